"""resilient.virt.failover_reservation through real ansible-playbook runs.

An explicit fleet shows planning, check mode, diff, convergence and removal on a SQLite store;
the lab shows a real evacuation: a hypervisor's libvirtd is killed and its VMs are started on the
hypervisor that holds their reservation.
"""
import libvirt
import yaml

from ansible_collections.resilient.virt.plugins.module_utils._state.store import open_store

from playbook_runner import play, run_playbook, store_records

FO = "resilient.virt.failover_reservation"

HYPERVISORS = [
    {"name": "kvm%d" % i, "az": "az1", "cpu": 32, "memory_mb": 131072} for i in range(1, 5)
]
VMS = [
    {"uuid": "vm-%d-%s" % (i, flavor), "host": "kvm%d" % i, "az": "az1", "flavor": flavor,
     "vcpus": 4, "memory_mb": 8192}
    for i in range(1, 5) for flavor in ("hana_small", "web")
]
REQUIREMENTS = {"hana_*": 2, "*": 1}


def _layout(task):
    return [(r["name"], r["host"], r["allocations"]) for r in task["reservations"]]


def _fleet(**extra):
    return dict(hypervisors=HYPERVISORS, vms=VMS, requirements=REQUIREMENTS, creator="tests", **extra)


def test_plan_check_mode_diff_convergence_and_absent(tmp_path):
    url = "sqlite:///%s" % (tmp_path / "state.db")
    tasks = [
        {"name": "plan in check mode", FO: _fleet(), "check_mode": True},
        {"name": "cycle 1", FO: _fleet()},
        {"name": "cycle 2", FO: _fleet()},
        {"name": "cycle 3", FO: _fleet()},
        {"name": "cycle 4", FO: _fleet()},
        {"name": "cycle 5", FO: _fleet(vm_status="all")},
        {"name": "remove in check mode", FO: {"creator": "tests", "state": "absent"}, "check_mode": True},
        {"name": "evacuation of one host", FO: dict(_fleet(), state="evacuated", failed_hosts=["kvm1"])},
        {"name": "evacuation of two hosts", FO: dict(_fleet(), state="evacuated", failed_hosts=["kvm1", "kvm2"]),
         "ignore_errors": True},
        {"name": "partial evacuation of two hosts",
         FO: dict(_fleet(), state="evacuated", failed_hosts=["kvm1", "kvm2"], allow_partial=True)},
        {"name": "remove", FO: {"creator": "tests", "state": "absent"}},
        {"name": "remove again", FO: {"creator": "tests", "state": "absent"}},
        {"name": "bad requirement", FO: dict(_fleet(), requirements={"*": "two"}), "ignore_errors": True},
        {"name": "bad vm", FO: dict(_fleet(), vms=[{"uuid": "x"}]), "ignore_errors": True},
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": url})], diff=True)
    assert run.rc == 0, run
    assert "Traceback" not in run.output

    planned = run.task("plan in check mode")
    assert planned["changed"] is True and planned["reservations"]
    first = run.task("cycle 1")
    assert _layout(first) == _layout(planned), "check mode planned something else"
    assert set(first["diff"]["after"]) == set(r["name"] for r in first["reservations"])
    assert first["diff"]["before"] == {}

    final = run.task("cycle 5")
    assert final["changed"] is False, "five cycles did not converge"
    summary = final["summary"]
    assert summary["vms_requiring"] == 8 and summary["vms_covered"] == 8, final["vm_status"]
    assert summary["coverage_ratio"] == 1.0
    for res in final["reservations"]:
        assert res["creator"] == "tests"
        assert res["host"] not in res["allocations"].values(), "a VM holds a slot on its own host"
    assert len(final["vm_status"]) == len(VMS)  # vm_status: all
    for status in final["vm_status"]:
        assert status["held"] >= status["required"] and status["short_by"] == 0
    assert run.task("cycle 4")["vm_status"] == []  # by default, only the VMs short of slots

    assert run.task("remove in check mode")["changed"] is True
    one = run.task("evacuation of one host")["evacuation"]
    assert one["complete"] is True and one["affected"] == 2 and one["placed"] == 2
    refused = run.task("evacuation of two hosts")
    # a DR runbook must not read a partial evacuation as done: failed, with the plan to read
    assert refused.failed and refused["error"]["type"] == "QuotaExceeded"
    assert "allow_partial" in refused["msg"] and refused["evacuation"]["complete"] is False
    partial = run.task("partial evacuation of two hosts")
    assert not partial.failed and "no reservation of their own left" in " ".join(partial["warnings"])
    two = partial["evacuation"]
    assert two == refused["evacuation"]
    assert two["affected"] == 4
    assert len({m["reservation"] for m in two["moves"]}) == len(two["moves"]), "a reservation was used twice"
    assert all(m["to_host"] not in ("kvm1", "kvm2") for m in two["moves"])
    # only the hana VMs need 2 slots, so only they are guaranteed to survive two failures
    assert {"vm-1-hana_small", "vm-2-hana_small"} <= {m["vm"] for m in two["moves"]}
    assert all(u["vm"].endswith("-web") for u in two["unplaced"])

    removed = run.task("remove")
    assert removed["changed"] is True
    assert sorted(removed["removed"]) == sorted(r["name"] for r in final["reservations"])
    assert run.task("remove again")["changed"] is False
    assert open_store(url).get("failover", "tests") is None

    bad = run.task("bad requirement")
    assert bad.failed and bad["error"]["type"] == "InvalidSpec"
    assert "requirements" in bad["msg"]
    bad_vm = run.task("bad vm")
    assert bad_vm.failed and "vms[0]" in bad_vm["msg"]


def test_counts_no_vm_can_hold_fail_at_once_and_store_nothing(tmp_path):
    """A requirement of 10^9 slots once ran the worker for more than 10 minutes (the bound
    counted reservations up one by one); it is refused at once now, as is a count above the
    fleet's other hypervisors, and a count of 100 (the most) on 101 hypervisors is planned."""
    url = "sqlite:///%s" % (tmp_path / "state.db")
    two = HYPERVISORS[:2]
    web = [{"uuid": "vm-web", "host": "kvm1", "az": "az1", "flavor": "web", "vcpus": 4, "memory_mb": 8192}]
    many = [{"name": "kvm%03d" % i, "az": "az1", "cpu": 32, "memory_mb": 131072} for i in range(101)]
    tasks = [
        {"name": "a billion slots", "ignore_errors": True,
         FO: dict(hypervisors=two, vms=web, requirements={"web": 10 ** 9}, creator="huge")},
        {"name": "more slots than other hypervisors", "ignore_errors": True,
         FO: dict(hypervisors=two, vms=web, requirements={"*": 1, "web": 2}, creator="over")},
        {"name": "a hundred slots", FO: dict(
            hypervisors=many, vms=[dict(web[0], host="kvm000")], requirements={"web": 100},
            creator="most")},
        {"name": "planning past the deadline", "ignore_errors": True,
         FO: dict(hypervisors=many, vms=[dict(web[0], host="kvm000")], requirements={"web": 100},
                  creator="late", resilience={"deadline": "1ms"})},
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults={"state_store": url})], timeout=120)
    assert run.rc == 0, run
    assert "Traceback" not in run.output and "dead state" not in run.output

    huge = run.task("a billion slots")
    assert huge.failed and huge["error"]["type"] == "InvalidSpec", huge
    assert huge["msg"].startswith("InvalidSpec: requirements['web']: the count 1000000000 ")
    assert "give at most 100" in huge["msg"]
    assert huge.duration < 30, huge.duration
    over = run.task("more slots than other hypervisors")
    assert over.failed and over["error"]["type"] == "InvalidSpec", over
    assert over["msg"].startswith("InvalidSpec: requirements['web']: VM vm-web ")
    assert "give at most 1" in over["msg"]

    most = run.task("a hundred slots")
    assert most["summary"]["vms_covered"] == 1 and most["summary"]["reservations"] == 100, most
    assert most["summary"]["lower_bound_reservations"] == 100
    assert most.duration < 60, most.duration

    late = run.task("planning past the deadline")
    assert late.failed and late["error"]["type"] == "Timeout", late
    assert "resilience.deadline (0.001s)" in late["msg"] and "nothing was stored" in late["msg"]
    assert sorted(store_records(url, "failover")) == ["most"]


def _domain_on(uri, name):
    conn = libvirt.open(uri)
    try:
        dom = conn.lookupByName(name)
        return dom.isActive()
    except libvirt.libvirtError:
        return None
    finally:
        conn.close()


def test_evacuation_moves_vms_of_a_killed_hypervisor(tmp_path, lab, lab_module, outage):
    providers = {hv: lab_module.provider_config(lab.hypervisor(hv)) for hv in ("hv1", "hv3")}
    names = ["evac-web-1", "evac-web-2"]
    defaults = {"state_store": "sqlite:///%s" % (tmp_path / "state.db"), "providers": providers}
    setup = [
        {"name": "create", "loop": names, "resilient.virt.vm": {
            "provider": "hv1", "name": "{{ item }}", "vcpus": 1, "memory_mb": 64,
            "metadata": {"flavor": "web"}, "state": "running"}},
        {"name": "reserve", FO: {
            "all_providers": True, "requirements": {"*": 1}, "creator": "evac", "limit_one_new_per_hypervisor": False}},
    ]
    run = run_playbook(tmp_path, [play(setup, module_defaults=defaults)], name="setup")
    assert run.rc == 0, run
    reserved = run.task("reserve")
    assert reserved["summary"]["vms_covered"] == 2, reserved["vm_status"]
    assert {r["host"] for r in reserved["reservations"]} == {"hv3"}

    outage.stop("hv1")
    evacuate = [
        {"name": "plan only", FO: {"creator": "evac", "state": "evacuated", "failed_hosts": ["hv1"]},
         "check_mode": True},
        {"name": "evacuate", FO: {"creator": "evac", "state": "evacuated", "failed_hosts": ["hv1"]}},
        {"name": "evacuate again", FO: {"creator": "evac", "state": "evacuated", "failed_hosts": ["hv1"]}},
    ]
    try:
        run = run_playbook(tmp_path, [play(evacuate, module_defaults=defaults)], name="evacuate")
        assert run.rc == 0, run
        planned = run.task("plan only")["evacuation"]
        assert planned["complete"] and [m["action"] for m in planned["moves"]] == ["recreate", "recreate"]
        moved = run.task("evacuate")
        assert moved["changed"] is True
        assert all(m["action"] == "recreate" and m["to_host"] == "hv3" for m in moved["evacuation"]["moves"])
        hv3 = lab.hypervisor("hv3").uri
        assert all(_domain_on(hv3, name) == 1 for name in names), "VMs are not running on hv3"
        again = run.task("evacuate again")
        assert again["changed"] is False
        assert all(m["action"] == "none" for m in again["evacuation"]["moves"])
    finally:
        outage.start("hv1")
        cleanup = [{"name": "delete on %s" % hv,
                    "resilient.virt.vm": {"provider": hv, "name": "{{ item }}", "state": "absent"},
                    "loop": names} for hv in ("hv1", "hv3")]
        cleanup.append({"name": "drop", FO: {"creator": "evac", "state": "absent"}})
        run_playbook(tmp_path, [play(cleanup, module_defaults=defaults)], name="cleanup")


def test_an_evacuation_whose_move_fails_fails_unless_partial_is_allowed(tmp_path, lab, lab_module,
                                                                        outage):
    providers = {hv: lab_module.provider_config(lab.hypervisor(hv)) for hv in ("hv1", "hv3")}
    name = "evac-fail-1"
    defaults = {"state_store": "sqlite:///%s" % (tmp_path / "state.db"), "providers": providers,
                "resilience": {"max_attempts": 1}}
    setup = [
        {"name": "create", "resilient.virt.vm": {
            "provider": "hv1", "name": name, "vcpus": 1, "memory_mb": 64,
            "metadata": {"flavor": "web"}, "state": "running"}},
        {"name": "reserve", FO: {"all_providers": True, "requirements": {"*": 1}, "creator": "evac-fail"}},
    ]
    run = run_playbook(tmp_path, [play(setup, module_defaults=defaults)], name="setup")
    assert run.rc == 0, run
    assert run.task("reserve")["summary"]["vms_covered"] == 1
    evacuate = {"creator": "evac-fail", "state": "evacuated", "failed_hosts": ["hv1"]}
    outage.stop("hv1")
    outage.stop("hv3")  # the hypervisor holding the reservation is down too: the move fails
    tasks = [{"name": "strict", FO: evacuate, "ignore_errors": True},
             {"name": "partial", FO: dict(evacuate, allow_partial=True)}]
    try:
        run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], name="evacuate")
        assert run.rc == 0, run
        strict = run.task("strict")
        [move] = strict["evacuation"]["moves"]
        assert move["action"] == "failed" and move["to_host"] == "hv3"
        assert strict.failed and strict["error"]["type"] == move["error"]["type"] == "Unavailable"
        assert "1 of 1 moves failed" in strict["msg"] and "allow_partial" in strict["msg"]
        partial = run.task("partial")
        assert not partial.failed and partial["evacuation"]["moves"][0]["action"] == "failed"
        assert "1 of 1 moves failed" in " ".join(partial["warnings"])
    finally:
        outage.start("hv3")
        outage.start("hv1")
        cleanup = [{"name": "delete", "resilient.virt.vm": {"provider": "hv1", "name": name,
                                                            "state": "absent"}},
                   {"name": "drop", FO: {"creator": "evac-fail", "state": "absent"}}]
        run_playbook(tmp_path, [play(cleanup, module_defaults=defaults)], name="cleanup")


def test_evacuation_migrates_vsphere_vms(tmp_path, lab):
    with open(lab.inventory_file) as f:
        vcsim = yaml.safe_load(f)["all"]["vars"]["resilient_virt_providers"]["vcsim"]
    names = ["evac-vs-1", "evac-vs-2"]
    defaults = {"state_store": "sqlite:///%s" % (tmp_path / "state.db"), "provider": vcsim}
    setup = [
        {"name": "create", "loop": names, "resilient.virt.vm": {
            "name": "{{ item }}", "vcpus": 1, "memory_mb": 256, "metadata": {"flavor": "web"}, "state": "running"}},
        {"name": "reserve", FO: {"requirements": {"web": 1}, "creator": "evac-vs",
                                 "limit_one_new_per_hypervisor": False}},
        {"name": "where", "resilient.virt.vm_info": {"filters": {"state": "running"}}},
    ]
    run = run_playbook(tmp_path, [play(setup, module_defaults=defaults)], name="vs-setup")
    try:
        assert run.rc == 0, run
        assert run.task("reserve")["summary"]["vms_covered"] == 2, run.task("reserve")["vm_status"]
        host = {vm["name"]: vm["hypervisor"] for vm in run.task("where")["vms"]}[names[0]]
        # the simulator's own VMs on that host require no slot, hold none and stay unplaced
        evacuate = {FO: {"creator": "evac-vs", "state": "evacuated", "failed_hosts": [host],
                         "allow_partial": True}}
        tasks = [dict(evacuate, name="evacuate"), dict(evacuate, name="evacuate again"),
                 {"name": "after", "resilient.virt.vm_info": {"name": names[0]}}]
        run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], name="vs-evacuate")
        assert run.rc == 0, run
        moves = run.task("evacuate")["evacuation"]["moves"]
        mine = [m for m in moves if m["name"] == names[0]]
        assert len(mine) == 1 and mine[0]["action"] == "migrate" and mine[0]["to_host"] != host, moves
        after = run.task("after")["vms"][0]
        assert after["hypervisor"] == mine[0]["to_host"] and after["state"] == "running"
        assert all(m["action"] == "none" for m in run.task("evacuate again")["evacuation"]["moves"])
    finally:
        cleanup = [{"name": "delete", "loop": names, "resilient.virt.vm": {"name": "{{ item }}", "state": "absent"}},
                   {"name": "drop", FO: {"creator": "evac-vs", "state": "absent"}}]
        run_playbook(tmp_path, [play(cleanup, module_defaults=defaults)], name="vs-cleanup")


def test_the_role_stops_quietly_after_its_last_cycle(tmp_path, lab, lab_module):
    """Three web VMs on hv1 need three reservations on hv3, one new per hypervisor and cycle:
    three cycles. With failover_max_cycles 2 the role runs two and ends ok, without the error
    Ansible shows for an ``until`` loop that runs out of retries; the next run finishes."""
    providers = {hv: lab_module.provider_config(lab.hypervisor(hv)) for hv in ("hv1", "hv3")}
    names = ["role-web-1", "role-web-2", "role-web-3"]
    url = "sqlite:///%s" % (tmp_path / "state.db")
    defaults = {"state_store": url, "providers": providers}

    def role(**extra):
        return {"name": "role", "ansible.builtin.include_role": {"name": "resilient.virt.failover_reservations"},
                "vars": dict(failover_requirements={"web": 1}, failover_creator="role", **extra)}

    def held():
        record = store_records(url, "failover").get("role", {})
        return sorted(r["host"] for r in record.get("reservations", []))

    create = {"name": "create", "loop": names, "resilient.virt.vm": {
        "provider": "hv1", "name": "{{ item }}", "vcpus": 1, "memory_mb": 64,
        "metadata": {"flavor": "web"}, "state": "present"}}
    cleanup = [{"name": "delete", "loop": names,
                "resilient.virt.vm": {"provider": "hv1", "name": "{{ item }}", "state": "absent"}},
               {"name": "drop", FO: {"creator": "role", "state": "absent"}}]
    try:
        run = run_playbook(tmp_path, [play([create, role(failover_max_cycles=2)], module_defaults=defaults)],
                           name="short")
        assert run.rc == 0, run
        cycles = next(t for t in run.tasks if t.name.endswith("until a cycle changes nothing"))
        assert cycles["changed"] is True, cycles
        assert "exception" not in cycles.result, cycles  # what Ansible shows as the error
        assert "Traceback" not in run.output, run.output
        assert held() == ["hv3", "hv3"]
        run = run_playbook(tmp_path, [play([role()], module_defaults=defaults)], name="rest")
        assert run.rc == 0, run
        assert held() == ["hv3", "hv3", "hv3"]
    finally:
        run_playbook(tmp_path, [play(cleanup, module_defaults=defaults)], name="cleanup")
