"""How far a zone's plan has moved towards a target plan."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.target_progress import progress
from ansible_collections.resilient.virt.plugins.module_utils._failover.model import Reservation


def _res(name, host, members, memory_mb=1024):
    return Reservation(name, host, "z", {"cpu": 1, "memory_mb": memory_mb},
                       {uuid: "h-" + uuid for uuid in members}, "c")


def test_a_vm_has_moved_when_its_reservations_realize_its_targets():
    """a and b share T1 (h1) in the target, a also has T2 (h2), b T3 (h3). Now a holds X (h1,
    a only: part of T1) and Y (h2): a has moved. b holds X2 (h1, b only, also part of T1) and
    Z (h4): X, serving one VM like X2, comes first by name, so X2 realizes nothing; b has not
    moved, nor has c, which the target serves in T3 and which holds nothing here."""
    target = [_res("T1", "h1", ["a", "b"]), _res("T2", "h2", ["a"]), _res("T3", "h3", ["b", "c"])]
    current = [_res("X", "h1", ["a"]), _res("X2", "h1", ["b"]), _res("Y", "h2", ["a"]),
               _res("Z", "h4", ["b"])]
    state = progress(target, current, {"a": 1024, "b": 2048, "c": 4096})
    assert state.realized == {"T1": "X", "T2": "Y"}
    assert state.targets == {"a": ["T1", "T2"], "b": ["T1", "T3"], "c": ["T3"]}
    assert state.pending == ["c", "b"]  # largest memory first


def test_the_reservation_serving_the_most_vms_realizes_then_the_same_name():
    """On h1, P serves a and b, Q serves a only and R serves b only: P realizes T (both of its
    VMs, and more than any other); with two equal candidates the one named like the target wins.
    A reservation serving a VM the target's does not realize nothing."""
    target = [_res("T", "h1", ["a", "b"]), _res("U", "h2", ["c"])]
    state = progress(target, [_res("Q", "h1", ["a"]), _res("P", "h1", ["a", "b"]),
                              _res("R", "h1", ["b"])], {})
    assert state.realized == {"T": "P"}
    state = progress(target, [_res("A", "h2", ["c"]), _res("U", "h2", ["c"])], {})
    assert state.realized == {"U": "U"}
    state = progress(target, [_res("V", "h2", ["c", "d"])], {})
    assert state.realized == {}
