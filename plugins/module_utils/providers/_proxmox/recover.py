"""Recovering the VM of a failed, fenced Proxmox VE node on another node: PVE's HA manager does it.

PVE cannot migrate a VM off a node that does not answer; only its HA manager moves the VM's
configuration of a failed node to another node, once it has fenced the failed node, and starts
it there. :func:`recover` hands the VM to it for one recovery, onto the node asked:

1. checks first, nothing changed when one fails (Conflict naming the fix): the VM's node is
   offline (else it is PVE's migration: vm_migrate), the target is an online node out of HA
   maintenance, the VM's HA resource (when the user made it one) asks for ``started``, no
   node-affinity rule of the user places it, and its disks are on storage the target sees. A
   VM the user made an HA resource may already have been recovered by the HA manager, onto
   another node than the target: it is moved on by the same rule (an HA migration);
2. makes the VM an HA resource when it is not (first ``stopped``, marked by its comment as the
   collection's, so that it never starts elsewhere), adds the strict node-affinity rule
   :data:`RULE_PREFIX` ``<vmid>`` that allows the target node only, then asks ``started``;
3. waits, within ``task_timeout``, until the VM runs on the target;
4. puts HA back as the user had it: the rule removed, the HA resource too when it is the
   collection's; the same for any other VM that a rule of the collection pins to the node it
   runs on (left by a run that stopped there: its retry, finding the VM running, did not call
   again).

A run stopped anywhere is finished by the next: the rule and a resource of the collection show
that a recovery is under way (the checks are then not made again), and a VM that runs on the
target only needs step 4. Reasoning in docs/ha.md (Proxmox VE).
"""
import time

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotFound, Timeout)
from ansible_collections.resilient.virt.plugins.module_utils.providers._proxmox.nodes import (
    ha_maintenance)

__all__ = ("OWN_COMMENT", "RULE_PREFIX", "recover", "rule_id")

RULE_PREFIX = "resilient-virt-recover-"
OWN_COMMENT = "resilient.virt: made an HA resource to recover it from a failed node"
POLL = 0.5  # seconds between two looks at a VM the HA manager is recovering


def rule_id(vmid):
    """The id of the collection's node-affinity rule for the VM ``vmid``."""
    return "%s%s" % (RULE_PREFIX, vmid)


def _is_own(resource):
    return bool(resource) and resource.get("comment") == OWN_COMMENT


def recover(provider, name, node):
    """The VM dict of VM ``name`` after PVE's HA manager recovered it on ``node`` (see the
    module docstring)."""
    session = provider.session()
    records = session.resources()
    record = session.find_vm(name, session.qemu_of(records))
    vmid = record["vmid"]
    sid = "vm:%s" % vmid
    resources = dict((r.get("sid"), r) for r in session.get("cluster", "ha", "resources") or [])
    rules = dict((r.get("rule"), r) for r in session.get("cluster", "ha", "rules") or [])
    resource = resources.get(sid)
    if not (record.get("node") == node and record.get("status") == "running"):
        under_way = rule_id(vmid) in rules or _is_own(resource)
        if not under_way:
            _check(session, records, record, name, node, resource, rules)
        _hand_over(session, sid, vmid, node, resource, rules.get(rule_id(vmid)))
        _until_running(session, name, node)
    _give_back(session, sid)
    return session.describe(session.find_vm(name), name)


def _check(session, records, record, name, node, resource, rules):
    """Conflict (NotFound for an unknown node) when the HA manager cannot recover the VM on
    ``node``; nothing is changed."""
    key = session.provider.key
    status = dict((r.get("node"), r.get("status")) for r in records if r.get("type") == "node")
    if node not in status:
        raise NotFound("%s is not a node of %s (nodes: %s)" % (node, key, ", ".join(sorted(status))))
    if status.get(record.get("node")) == "online" and not resource:
        raise Conflict("VM %r is on node %s of %s, which is online: PVE's HA manager recovers only "
                       "the VMs of a failed node; move it with PVE's migration (vm_migrate)"
                       % (name, record.get("node"), key))
    if status[node] != "online":
        raise Conflict("node %s of %s is %s: the VM %r can only be recovered on an online node"
                       % (node, key, status[node], name))
    if node in ha_maintenance(session):
        raise Conflict("node %s of %s is in HA maintenance: PVE's HA manager places no VM there "
                       "until it ends; choose another node" % (node, key))
    if resource and resource.get("state") not in ("started", "enabled"):
        raise Conflict("VM %r is an HA resource of %s in state %s: the HA manager would not start "
                       "it; set its state to started (ha-manager set %s --state started)"
                       % (name, key, resource.get("state"), resource.get("sid")))
    sid = "vm:%s" % record["vmid"]
    for rule in rules.values():
        if rule.get("type") == "node-affinity" and not rule.get("disable") and \
                sid in str(rule.get("resources") or "").split(","):
            raise Conflict("VM %r is placed by the HA node-affinity rule %r of %s (nodes %s): the "
                           "HA manager recovers it where that rule says; add %s to its nodes, or "
                           "let the HA manager recover it alone" % (
                               name, rule.get("rule"), key, rule.get("nodes"), node))
    _check_disks(session, records, record, name, node)


def _check_disks(session, records, record, name, node):
    """Conflict unless the VM's disks are on shared storage that ``node`` sees. PVE cannot read
    the configuration of a VM of an offline node (its node answers for it), so its volumes are
    listed on the storages of ``node``: one on a storage that is not shared is the failed node's
    own copy, and none seen at all means they are all on the failed node's own storage."""
    vmid, key = record["vmid"], session.provider.key
    shared, local = [], []
    for entry in records:
        if entry.get("type") != "storage" or entry.get("node") != node or \
                "images" not in str(entry.get("content") or "").split(","):
            continue
        volumes = session.get("nodes", node, "storage", entry.get("storage"), "content",
                              vmid=vmid, content="images") or []
        (shared if entry.get("shared") else local).extend(v.get("volid") for v in volumes)
    restore = ("restore the VM from its last backup instead (failover_reservation "
               "restore_from_backup, or the backup module)")
    if local:
        raise Conflict("VM %r of %s cannot be recovered on %s: its disk %s is on storage that is "
                       "not shared, so the failed node's copy cannot come back; %s"
                       % (name, key, node, ", ".join(sorted(local)), restore))
    if not shared:
        raise Conflict("VM %r of %s cannot be recovered on %s: none of its disks is on a shared "
                       "storage %s sees (they are on the failed node's own storage); %s"
                       % (name, key, node, node, restore))


def _hand_over(session, sid, vmid, node, resource, rule):
    """The VM an HA resource (the collection's, ``stopped`` first), the rule (``rule``: the one a
    stopped run made, pointed at ``node`` when it named another), then ``started``."""
    if resource is None:
        session.post("cluster", "ha", "resources", sid=sid, state="stopped", comment=OWN_COMMENT)
        resource = {"sid": sid, "state": "stopped", "comment": OWN_COMMENT}
    if rule is not None and rule.get("nodes") != node:
        session.put("cluster", "ha", "rules", rule_id(vmid), type="node-affinity", nodes=node)
    if rule is None:
        session.post("cluster", "ha", "rules", rule=rule_id(vmid), type="node-affinity",
                     resources=sid, nodes=node, strict=1,
                     comment="resilient.virt: recovery of %s onto %s; removed once it runs there"
                     % (sid, node))
    if _is_own(resource) and resource.get("state") != "started":
        session.put("cluster", "ha", "resources", sid, state="started")


def _until_running(session, name, node):
    """Wait until the VM runs on ``node``: Conflict when the HA manager reports it in error,
    Timeout after ``task_timeout`` (a run again finishes the recovery)."""
    limit = session.provider.config["task_timeout"]
    end = time.monotonic() + limit
    while True:
        record = session.find_vm(name)
        if record.get("node") == node and record.get("status") == "running":
            return
        if record.get("hastate") == "error":
            raise Conflict("PVE's HA manager could not start VM %r on %s (HA state error); see "
                           "`ha-manager status` and the node's log" % (name, node))
        if time.monotonic() >= end:
            raise Timeout("VM %r of %s does not run on %s yet after %gs: PVE's HA manager "
                          "recovers it once it has fenced the failed node; run again to finish "
                          "(the rule %s stays until then)" % (
                              name, session.provider.key, node, limit,
                              rule_id(record["vmid"])), details={"timeout": limit})
        time.sleep(POLL)


def _give_back(session, sid):
    """HA as the user had it, for the VM ``sid`` and for every VM a rule of the collection
    pins to a node it runs on (a run that stopped after the VM ran there, and whose retry then
    found it done, left that rule): the collection's rule removed, and the HA resource when it is
    the collection's."""
    running = dict(("vm:%s" % r.get("vmid"), r.get("node")) for r in session.vm_resources()
                   if r.get("status") == "running")
    done = {sid}
    for rule in session.get("cluster", "ha", "rules") or []:
        name, pinned = str(rule.get("rule") or ""), str(rule.get("resources") or "")
        if not name.startswith(RULE_PREFIX) or pinned != "vm:%s" % name[len(RULE_PREFIX):]:
            continue
        if pinned == sid or running.get(pinned) == rule.get("nodes"):
            session.delete("cluster", "ha", "rules", name)
            done.add(pinned)
    for resource in session.get("cluster", "ha", "resources") or []:
        if resource.get("sid") in done and _is_own(resource):
            session.delete("cluster", "ha", "resources", resource["sid"])
