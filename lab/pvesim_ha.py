"""PVE's HA manager, simulated for the lab's Proxmox VE API simulator (fakepve keeps a VM's HA
state, ``ha_state``, and nothing else of HA: no resource list, no rules, no recovery).

:func:`with_ha_recovery` gives a fakepve cluster:

* the HA resources (``/cluster/ha/resources``, ``/cluster/ha/resources/{sid}``: GET, POST, PUT,
  DELETE) of its VMs: a VM is one when its ``ha_state`` is set, the way fakepve already shows
  it in ``/cluster/resources`` (``hastate``); a resource's other options (``comment``...) are
  kept in ``pve.ha_options``;
* the HA rules (``/cluster/ha/rules``, ``/cluster/ha/rules/{rule}``), in ``pve.ha_rules``, with
  PVE's refusals in its words (a rule of that id already defined, no resources or nodes, a
  resource that is not HA managed, a node that does not exist);
* the recovery of a failed node's HA resources: a node set offline (fakepve's
  ``set_node_offline``) is fenced ``pve.ha_fence_secs`` PVE seconds later (PVE: once its lock
  expired, so its watchdog has reset it), then each HA resource on it is moved onto an online node
  out of maintenance (``pve.maintenance``, :func:`pvesim.with_node_maintenance`) that its
  enabled node-affinity rules allow, and started there when its requested state is ``started``.
  PVE's choice among several nodes: the highest priority group of the rule's nodes that has an
  online node, then the node with the fewest HA resources, then the name; a strict rule with none
  online leaves the resource where it is until one is (PVE: state ``recovery``), a non-strict one
  falls back to every online node. A resource on an online node that a strict rule does not
  allow is moved to one that it allows, and a requested state is applied (``started`` starts the
  VM, ``stopped`` stops it), as the HA manager does on its next round.

What it does not model: the CRM's rounds (it acts at once on each change, after the fence delay),
watchdogs, the LRM, resource-affinity rules, ``max_restart``/``max_relocate``, containers.
"""
import asyncio
import time

__all__ = ("with_ha_recovery",)

_RESOURCES = "/cluster/ha/resources"
_RULES = "/cluster/ha/rules"
_OPTIONS = ("comment", "max_restart", "max_relocate", "failback")
_RULE_KEYS = ("resources", "nodes", "strict", "disable", "comment", "affinity")


def _items(text):
    return [item.strip() for item in str(text or "").split(",") if item.strip()]


def _priorities(nodes):
    """{node: priority} of a rule's ``nodes`` (``pve1:2,pve2``: priority 0 when none is given)."""
    out = {}
    for item in _items(nodes):
        name, _sep, priority = item.partition(":")
        out[name] = int(priority or 0)
    return out


def with_ha_recovery(pve):
    """Give the fakepve cluster ``pve`` PVE's HA resources, rules and recovery of a failed
    node's HA resources (see the module docstring); returns ``pve``."""
    from fakepve.model import PveError

    synthesise = pve.synthesise
    set_node_offline = pve.set_node_offline
    pve.ha_rules = {}
    pve.ha_options = {}
    pve.ha_fenced = set()
    pve.ha_fence_secs = 60
    pve.maintenance = getattr(pve, "maintenance", set())

    def vm_of(sid):
        kind, _sep, vmid = str(sid).partition(":")
        if not vmid:
            kind, vmid = "vm", kind
        if kind != "vm" or not vmid.isdigit():
            raise PveError(500, "unable to parse service id '%s'" % sid)
        vm = pve.vm(int(vmid))
        if vm is None or vm.template:
            raise PveError(500, "unable to detect SID from VMID - VM/CT %s does not exist" % vmid)
        return "vm:%d" % vm.vmid, vm

    def resource(vm):
        sid = "vm:%d" % vm.vmid
        return dict(pve.ha_options.get(sid, {}), sid=sid, type="vm", state=vm.ha_state)

    def managed(sid):
        sid, vm = vm_of(sid)
        if not vm.ha_managed:
            raise PveError(500, "no such resource '%s'" % sid)
        return sid, vm

    def online(node):
        return pve.nodes.get(node, {}).get("online", True)

    def allowed(sid):
        """The nodes the enabled node-affinity rules of ``sid`` allow, best first, or None."""
        candidates = [node for node in sorted(pve.nodes) if online(node) and node not in pve.maintenance]
        for rule in pve.ha_rules.values():
            if rule.get("type") != "node-affinity" or str(rule.get("disable", 0)) in ("1", "true") or \
                    sid not in _items(rule.get("resources")):
                continue
            priorities = _priorities(rule.get("nodes"))
            if rule.get("affinity") == "negative":
                priorities = dict((n, 0) for n in pve.nodes if n not in priorities)
            usable = [n for n in candidates if n in priorities]
            if not usable:
                return [] if str(rule.get("strict", 0)) in ("1", "true") else candidates
            top = max(priorities[n] for n in usable)
            return [n for n in usable if priorities[n] == top]
        return None

    def load(node):
        return sum(1 for vm in pve.vms if vm.ha_managed and vm.node == node)

    def place(vm, nodes):
        vm.node = min(nodes, key=lambda n: (load(n), n))

    def apply_state(vm):
        if vm.ha_state == "started" and vm.status != "running":
            vm.apply_pending()
            vm.status = vm.qmpstatus = "running"
            vm.started_at = time.time()
        elif vm.ha_state == "stopped" and vm.status != "stopped":
            vm.status = vm.qmpstatus = "stopped"

    def manage():
        """One round of the HA manager: recover, follow the rules, apply requested states."""
        for vm in pve.vms:
            if not vm.ha_managed or vm.ha_state == "ignored":
                continue
            sid = "vm:%d" % vm.vmid
            nodes = allowed(sid)
            if not online(vm.node):
                if vm.node not in pve.ha_fenced:
                    continue
                nodes = [n for n in sorted(pve.nodes) if online(n) and n not in pve.maintenance] \
                    if nodes is None else nodes
                if not nodes:
                    continue  # PVE: in recovery until a node it may run on is online
                vm.status = vm.qmpstatus = "stopped"
                place(vm, nodes)
            elif nodes is not None and vm.node not in nodes and nodes:
                place(vm, nodes)
            apply_state(vm)

    def fence_later(node):
        async def fence():
            await pve.pause(pve.ha_fence_secs)
            if not online(node):
                pve.ha_fenced.add(node)
                manage()
        asyncio.ensure_future(fence())

    def offline(node, is_offline=True):
        set_node_offline(node, is_offline)
        if is_offline:
            fence_later(node)
        else:
            pve.ha_fenced.discard(node)

    def add_resource(values):
        sid, vm = vm_of(values.get("sid"))
        if vm.ha_managed:
            raise PveError(500, "resource ID '%s' already defined" % sid)
        vm.ha_state = values.get("state") or "started"
        pve.ha_options[sid] = dict((k, values[k]) for k in _OPTIONS if values.get(k) is not None)

    def change_resource(sid, values):
        sid, vm = managed(sid)
        if values.get("state"):
            vm.ha_state = values["state"]
        options = pve.ha_options.setdefault(sid, {})
        options.update((k, values[k]) for k in _OPTIONS if values.get(k) is not None)
        for key in _items(values.get("delete")):
            options.pop(key, None)

    def remove_resource(sid):
        sid, vm = vm_of(sid)
        if not vm.ha_managed:
            raise PveError(500, "cannot delete service '%s', not HA managed!" % sid)
        vm.ha_state = None
        pve.ha_options.pop(sid, None)

    def add_rule(values):
        rule = values.get("rule")
        if rule in pve.ha_rules:
            raise PveError(500, "HA rule '%s' already defined" % rule)
        check_rule(values)
        pve.ha_rules[rule] = dict((k, values[k]) for k in _RULE_KEYS if values.get(k) is not None)
        pve.ha_rules[rule].update(rule=rule, type=values.get("type") or "node-affinity")

    def check_rule(values):
        resources = _items(values.get("resources"))
        if not resources:
            raise PveError(500, "no resources were specified")
        unmanaged = [sid for sid in resources if not vm_of(sid)[1].ha_managed]
        if unmanaged:
            raise PveError(500, "cannot use unmanaged resource(s) %s." % ", ".join(unmanaged))
        if values.get("type", "node-affinity") == "node-affinity":
            nodes = list(_priorities(values.get("nodes")))
            if not nodes:
                raise PveError(500, "no nodes were specified")
            unknown = [n for n in nodes if n not in pve.nodes]
            if unknown:
                raise PveError(500, "cannot use non-existent node(s) %s." % ", ".join(unknown))

    def rule_of(name):
        if name not in pve.ha_rules:
            raise PveError(500, "no such ha rule '%s'" % name)
        return pve.ha_rules[name]

    def change_rule(name, values):
        rule = rule_of(name)
        rule.update((k, values[k]) for k in _RULE_KEYS if values.get(k) is not None)
        for key in _items(values.get("delete")):
            rule.pop(key, None)

    def rules(values):
        out = []
        for name in sorted(pve.ha_rules):
            rule = pve.ha_rules[name]
            if values.get("type") and rule.get("type") != values["type"]:
                continue
            if values.get("resource") and values["resource"] not in _items(rule.get("resources")):
                continue
            out.append(dict(rule))
        return out

    routes = {
        ("GET", _RESOURCES): lambda v: [resource(vm) for vm in pve.vms if vm.ha_managed],
        ("POST", _RESOURCES): add_resource,
        ("GET", _RESOURCES + "/{sid}"): lambda v: resource(managed(v["sid"])[1]),
        ("PUT", _RESOURCES + "/{sid}"): lambda v: change_resource(v["sid"], v),
        ("DELETE", _RESOURCES + "/{sid}"): lambda v: remove_resource(v["sid"]),
        ("GET", _RULES): rules,
        ("POST", _RULES): add_rule,
        ("GET", _RULES + "/{rule}"): lambda v: dict(rule_of(v["rule"])),
        ("PUT", _RULES + "/{rule}"): lambda v: change_rule(v["rule"], v),
        ("DELETE", _RULES + "/{rule}"): lambda v: pve.ha_rules.pop(rule_of(v["rule"])["rule"]),
    }

    async def with_ha(match, method, info, user, values):
        route = routes.get((method, match.template))
        if route is None:
            return await synthesise(match, method, info, user, values)
        if method == "GET":
            return route(values)
        pve.need_quorum()
        route(values)
        manage()
        return None

    pve.synthesise = with_ha
    pve.set_node_offline = offline
    return pve
