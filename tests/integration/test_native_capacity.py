"""A backend that holds failover capacity natively gets its hooks called by failover_reservation.

The third-party example backend (a named fake, installed by `make deps`) records what it holds in
``<path>.capacity.json``; the collection is not changed to use it.
"""
import json

from playbook_runner import play, run_playbook

FO = "resilient.virt.failover_reservation"


def _held(path):
    try:
        with open(str(path) + ".capacity.json") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def test_reservations_are_held_and_released_by_the_backend(tmp_path):
    files = {name: tmp_path / ("%s.json" % name) for name in ("m1", "m2")}
    providers = {name: {"type": "memory_example", "path": str(path), "az": "az1"} for name, path in files.items()}
    defaults = {"state_store": "sqlite:///%s" % (tmp_path / "state.db"), "providers": providers}
    tasks = [
        {"name": "create", "resilient.virt.vm": {"provider": "m1", "name": "app", "vcpus": 2, "memory_mb": 1024,
                                                 "metadata": {"flavor": "web"}, "state": "running"}},
        {"name": "reserve", FO: {"all_providers": True, "requirements": {"web": 1}, "creator": "native"}},
        {"name": "reserve again", FO: {"all_providers": True, "requirements": {"web": 1}, "creator": "native"}},
    ]
    run = run_playbook(tmp_path, [play(tasks, module_defaults=defaults)], name="hold")
    assert run.rc == 0, run
    reserved = run.task("reserve")
    [reservation] = reserved["reservations"]
    assert reservation["host"] == "m2"
    assert reserved["native_capacity"]["held"] == [reservation["name"]]
    held = _held(files["m2"])
    assert list(held) == [reservation["name"]]
    assert held[reservation["name"]]["vcpus"] == 2 and held[reservation["name"]]["memory_mb"] == 1024
    assert _held(files["m1"]) == {}
    assert "native_capacity" not in run.task("reserve again").result

    run = run_playbook(tmp_path, [play([{"name": "remove", FO: {"creator": "native", "state": "absent"}}],
                                       module_defaults=defaults)], name="release")
    assert run.rc == 0, run
    assert run.task("remove")["native_capacity"]["released"] == [reservation["name"]]
    assert _held(files["m2"]) == {}
