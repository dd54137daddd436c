"""Where a task runs: in the controller's worker or as a module process, with the same results.

Real ansible-playbook runs at -vvv, where the action plugin says which path ran the task and
why; the lab's hypervisor hv1 and the vSphere simulator are the providers.
"""
import json
import os
import stat
import sys

from playbook_runner import local_inventory, play, run_playbook

IN_WORKER = "the task runs in the controller's worker"
IN_MODULE = "a module process runs the task"
# values that differ between two runs of the same tasks, whatever ran them
VOLATILE = {"uuid", "lastTransitionTime", "updated_at", "next_retry_at", "opened_at",
            "half_open_at", "successes_total", "failures_total", "rejected_total", "mac",
            "consecutive_failures", "last_changed", "acknowledged_at", "created_at",
            "free_memory_mb", "used_memory_mb", "used_cpu", "vm_count",  # the host's own use
            "seconds", "buckets"}  # how long the calls took


# a hypervisor's memory (a dict with used_memory_mb): the host's MemTotal, which a memory
# balloon changes between two runs on a virtual machine
HOST_VOLATILE = {"memory_mb"}


def _normal(value, suffix):
    if isinstance(value, dict):
        volatile = VOLATILE | HOST_VOLATILE if "used_memory_mb" in value else VOLATILE
        return dict((key.replace(suffix, "SUFFIX"), "*" if key in volatile else _normal(sub, suffix))
                    for key, sub in value.items() if key not in ("resilient_virt_breakers",))
    if isinstance(value, list):
        return [_normal(item, suffix) for item in value]
    if isinstance(value, str):
        return value.replace(suffix, "SUFFIX")
    return value


def _tasks(lab, vsphere, suffix):
    name = "exe-" + suffix
    catalog = {"hv1": {"type": "libvirt", "name": "hv1", "uri": lab.hypervisor("hv1").uri,
                       "domain_type": "qemu"},
               "vcsim": dict(vsphere, name="vcsim")}
    fleet = [{"name": name + "-f1", "provider": "hv1", "vcpus": 1, "memory_mb": 64},
             {"name": name + "-f2", "provider": "vcsim", "vcpus": 1, "memory_mb": 64}]
    failover = {"hypervisors": [{"name": "a", "az": "z", "cpu": 8, "memory_mb": 4096},
                                {"name": "b", "az": "z", "cpu": 8, "memory_mb": 4096}],
                "vms": [{"uuid": "u1", "host": "a", "az": "z", "flavor": "web", "vcpus": 1,
                         "memory_mb": 512}],
                "requirements": {"*": 1}, "creator": name, "execute": False}
    steps = [
        ("provider", "provider", {"provider": "hv1"}, {}),
        ("vm planned", "vm", {"provider": "hv1", "name": name, "vcpus": 1, "memory_mb": 64},
         {"check_mode": True, "diff": True}),
        ("vm created", "vm", {"provider": "hv1", "name": name, "vcpus": 1, "memory_mb": 64}, {}),
        ("vm again", "vm", {"provider": "hv1", "name": name, "vcpus": 1, "memory_mb": 64}, {}),
        ("vm bad", "vm", {"provider": "hv1", "name": name + "/x", "vcpus": 1, "memory_mb": 64},
         {"ignore_errors": True}),
        ("vm_info", "vm_info", {"provider": "hv1", "name": name}, {}),
        ("fleet", "vm_fleet", {"owner": name, "vms": fleet}, {"diff": True}),
        ("breaker", "circuit_breaker", {"name": "libvirt:hv1"}, {}),
        ("failover", "failover_reservation", failover, {}),
        ("failover absent", "failover_reservation", {"state": "absent", "creator": name}, {}),
        ("fleet gone", "vm_fleet", {"owner": name, "vms": [], "prune": True, "max_prune": "100%"}, {}),
        ("vm gone", "vm", {"provider": "hv1", "name": name, "state": "absent"}, {}),
    ]
    tasks = [dict({"name": title, "resilient.virt." + module: args}, **extra)
             for title, module, args, extra in steps]
    return [title for title, _m, _a, _e in steps], tasks, {"providers": catalog}


def test_both_paths_give_the_same_results(lab, vsphere, tmp_path):
    runs = {}
    for path, suffix, env in (("worker", "w7q", {}),
                              ("module", "m7q", {"RESILIENT_VIRT_IN_PROCESS": "false"})):
        titles, tasks, defaults = _tasks(lab, vsphere, suffix)
        defaults["state_store"] = "sqlite:///%s" % (tmp_path / (suffix + ".db"))
        run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], env=env,
                           args=("-vvv",), name=path)
        assert run.rc == 0, run.describe()
        shown = IN_WORKER if path == "worker" else IN_MODULE
        assert run.output.count(shown) == len(titles), run.output[-3000:]
        runs[path] = dict((title, _normal(run.task(title).result, suffix)) for title in titles)
    for title in titles:
        worker, module = runs["worker"][title], runs["module"][title]
        assert sorted(worker) == sorted(module), title
        assert worker == module, "%s differs:\nworker %s\nmodule %s" % (
            title, json.dumps(worker, sort_keys=True)[:3000], json.dumps(module, sort_keys=True)[:3000])
    assert runs["worker"]["vm bad"]["failed"] and runs["worker"]["vm bad"]["error"]["type"] == "InvalidSpec"
    assert runs["worker"]["vm planned"]["diff"]["after"]["state"] == "stopped"
    assert runs["worker"]["fleet"]["summary"]["created"] == 2


def test_the_task_environment_reaches_the_worker_and_other_variables_need_a_module(lab, tmp_path):
    store = tmp_path / "from-task-environment.db"
    provider = {"type": "libvirt", "name": "hv1", "uri": lab.hypervisor("hv1").uri}
    tasks = [
        {"name": "own variables", "resilient.virt.vm_info": {"provider": provider},
         "environment": {"RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % store}},
        {"name": "other variables", "resilient.virt.vm_info": {"provider": provider},
         "environment": {"RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % store,
                         "SOME_LIBRARY_SETTING": "1"}},
        {"name": "async", "resilient.virt.vm_info": {"provider": provider}, "async": 60, "poll": 1,
         "environment": {"RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % store}},
    ]
    run = run_playbook(tmp_path, [play(tasks)], args=("-vvv",), name="environment",
                       env={"RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % (tmp_path / "controller.db")})
    assert run.rc == 0, run.describe()
    assert store.exists() and not (tmp_path / "controller.db").exists()
    assert "resilient.virt.vm_info: %s" % IN_WORKER in run.output
    assert "the task's environment sets SOME_LIBRARY_SETTING" in run.output
    assert "%s: the task is async" % IN_MODULE in run.output
    for title in ("own variables", "other variables", "async"):
        assert not run.task(title).failed, run.task(title)


def test_a_controller_without_libvirt_hands_the_task_to_a_module_process(lab, tmp_path):
    """The controller's Python cannot import libvirt (a stand-in module on its PYTHONPATH that
    raises ImportError); the module's interpreter, a wrapper that drops PYTHONPATH, can."""
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "libvirt.py").write_text("raise ImportError('libvirt hidden from the controller')\n")
    wrapper = tmp_path / "python-without-shim"
    wrapper.write_text("#!/bin/sh\nunset PYTHONPATH\nexec %s \"$@\"\n" % sys.executable)
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    inventory = local_inventory()
    inventory["all"]["hosts"]["localhost"]["ansible_python_interpreter"] = str(wrapper)
    provider = {"type": "libvirt", "name": "hv1", "uri": lab.hypervisor("hv1").uri}
    tasks = [{"name": "list", "resilient.virt.vm_info": {"provider": provider}},
             {"name": "breakers", "resilient.virt.circuit_breaker": {}}]
    pythonpath = os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")]))
    run = run_playbook(tmp_path, [play(tasks)], inventory=inventory, args=("-vvv",), name="nolib",
                       env={"PYTHONPATH": pythonpath,
                            "RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % (tmp_path / "s.db")})
    assert run.rc == 0, run.describe()
    assert "resilient.virt.vm_info: %s: the controller's Python cannot import libvirt" % IN_MODULE \
        in run.output
    assert "resilient.virt.circuit_breaker: %s" % IN_WORKER in run.output  # needs no libvirt
    assert isinstance(run.task("list")["vms"], list)


def test_a_module_without_its_libraries_names_them_all_with_the_pip_command(lab, tmp_path):
    """The module process cannot import libvirt, tenacity, pyVmomi or redis (stand-in modules
    on the PYTHONPATH of the task's environment raise ImportError): each task fails once, with
    one message naming every library it needs, in the wording of missing_required_lib."""
    shim = tmp_path / "shim"
    shim.mkdir()
    for name in ("libvirt", "tenacity", "pyVmomi", "pyVim", "redis"):
        (shim / ("%s.py" % name)).write_text("raise ImportError('%s hidden from the module')\n" % name)
    environment = {"PYTHONPATH": str(shim)}
    libvirt = {"type": "libvirt", "name": "hv1", "uri": lab.hypervisor("hv1").uri}
    vsphere = {"type": "vsphere", "name": "vc", "host": "127.0.0.1", "username": "u",
               "password": "not-shown-anywhere"}
    tasks = [
        {"name": "libvirt", "resilient.virt.vm_info": {"provider": libvirt},
         "environment": environment, "ignore_errors": True},
        {"name": "vsphere", "resilient.virt.vm_info": {
            "provider": vsphere, "state_store": "redis://127.0.0.1:1/0"},
         "environment": environment, "ignore_errors": True},
    ]
    run = run_playbook(tmp_path, [play(tasks)], name="nolibs",
                       env={"RESILIENT_VIRT_STATE_STORE": "sqlite://%s" % (tmp_path / "s.db")})
    assert run.rc == 0, run.describe()
    assert "Traceback" not in run.output and "not-shown-anywhere" not in run.output
    for title, packages in (("libvirt", ["libvirt-python", "tenacity"]),
                            ("vsphere", ["pyvmomi", "redis", "tenacity"])):
        failed = run.task(title)
        assert failed.failed and failed["error"]["type"] == "MissingLibrary", failed
        assert failed["error"]["details"]["libraries"] == packages
        message = failed["msg"]
        assert message.startswith("MissingLibrary: Failed to import the required Python library "
                                  "(%s)" % ", ".join(packages)), message
        assert message.endswith("ansible_python_interpreter"), message
        assert "-m pip install %s;" % " ".join(packages) in message or \
            "-m pip install %s" % " ".join(packages) in message, message
