"""The vms list checked before anything is contacted, and the prune limit."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._fleet.desired import check_owner, desired_fleet
from ansible_collections.resilient.virt.plugins.module_utils._fleet.prune import (
    PruneLimit, candidates, check_limit)
from ansible_collections.resilient.virt.plugins.module_utils.errors import InvalidSpec, field_error
from ansible_collections.resilient.virt.plugins.module_utils.providers._registry import provider_key
from ansible_collections.resilient.virt.plugins.module_utils.providers.contract import OWNER_KEY

CATALOG = {"h1": {"type": "libvirt", "uri": "test:///default", "name": "h1"},
           "h2": {"type": "libvirt", "uri": "test:///default", "name": "h2"}}


def resolve(reference, path):
    if isinstance(reference, dict):
        return dict(reference)
    if reference not in CATALOG:
        raise field_error(path, "%r names no entry of 'providers'" % (reference,))
    return dict(CATALOG[reference])


def fleet(entries, default="h1"):
    return desired_fleet(entries, default, resolve, provider_key)


def problems(entries):
    with pytest.raises(InvalidSpec) as info:
        fleet(entries)
    return dict((e["path"], e["message"]) for e in info.value.details["errors"])


def test_entries_resolve_their_provider_and_identity():
    vms = fleet([{"name": "a", "vcpus": 1, "memory_mb": 64},
                 {"name": "a", "provider": "h2", "state": "running"},
                 {"name": "b", "provider": {"type": "libvirt", "uri": "test:///default", "name": "x"}}])
    assert [(v.id, v.state, v.provider_ref) for v in vms] == [
        ("libvirt:h1/a", "present", "h1"), ("libvirt:h2/a", "running", "h2"),
        ("libvirt:x/b", "present", None)]
    assert vms[0].create_spec("web") == {"vcpus": 1, "memory_mb": 64, "metadata": {OWNER_KEY: "web"}}


def test_every_problem_is_reported_by_path_at_once():
    found = problems([
        {"name": "a", "vcpu": 1},
        {"name": "", "state": "restarted"},
        {"name": "c", "memory_mb": 0, "tags": "web", "metadata": {OWNER_KEY: "x"}},
        "d",
        {"name": "e", "provider": "nowhere"},
        {"name": "f", "provider": {"type": "libvirt", "uri": "test:///default", "bogus": 1}},
        {"name": "a"},
    ])
    assert set(found) == {"vms[0].vcpu", "vms[1].name", "vms[1].state", "vms[2].memory_mb",
                          "vms[2].tags", "vms[2].metadata.%s" % OWNER_KEY, "vms[3]",
                          "vms[4].provider", "vms[5].provider.bogus", "vms[6].name"}
    assert "vms[0]" in found["vms[6].name"]  # the duplicate names the first entry
    assert "restarted" in found["vms[1].state"]


def test_owner_must_be_a_plain_identifier():
    assert check_owner("web-1.prod") == "web-1.prod"
    for bad in ("", "a|b", "-x", "x" * 64, None):
        with pytest.raises(InvalidSpec) as info:
            check_owner(bad)
        assert info.value.details["errors"][0]["path"] == "owner"


@pytest.mark.parametrize("value, owned, allowed", [
    (5, 100, 5), ("5", 3, 5), ("10%", 60, 6), ("10%", 9, 0), ("100%", 7, 7), (0, 10, 0)])
def test_prune_limit(value, owned, allowed):
    assert PruneLimit(value).allowed(owned) == allowed


@pytest.mark.parametrize("value", ["abc", "150%", -1, True, "5.5", None])
def test_bad_prune_limits_name_max_prune(value):
    with pytest.raises(InvalidSpec) as info:
        PruneLimit(value)
    assert info.value.details["errors"][0]["path"] == "max_prune"


def test_only_marked_unlisted_vms_are_candidates():
    listings = {"libvirt:h1": [
        {"name": "keep", "metadata": {OWNER_KEY: "web"}},
        {"name": "gone", "metadata": {OWNER_KEY: "web"}},
        {"name": "foreign", "metadata": {OWNER_KEY: "db"}},
        {"name": "unmarked", "metadata": {}},
    ]}
    found, prune = candidates(listings, "web", {"libvirt:h1/keep"})
    assert found == 2 and [vm["name"] for _key, vm in prune] == ["gone"]
    check_limit(PruneLimit(1), found, prune)
    with pytest.raises(InvalidSpec) as info:
        check_limit(PruneLimit("10%"), found, prune)
    assert "libvirt:h1/gone" in info.value.message and "allows 0" in info.value.message


def test_adopt_is_a_checked_flag_that_only_an_adopting_entry_hashes():
    plain, adopting, explicit_no = fleet([
        {"name": "a", "vcpus": 1, "memory_mb": 64},
        {"name": "b", "vcpus": 1, "memory_mb": 64, "adopt": True},
        {"name": "c", "vcpus": 1, "memory_mb": 64, "adopt": False}])
    assert (plain.adopt, adopting.adopt, explicit_no.adopt) == (False, True, False)
    assert "adopt" not in plain.spec and "adopt" not in adopting.spec
    # the hash of an entry without adopt is what it always was (no reconcile of every VM)
    assert fleet([{"name": "c", "vcpus": 1, "memory_mb": 64}])[0].spec_hash == explicit_no.spec_hash
    assert fleet([{"name": "b", "vcpus": 1, "memory_mb": 64}])[0].spec_hash != adopting.spec_hash
    # only an adopting entry asks for the marker on a VM that exists already
    assert plain.wanted_spec("web") == {"vcpus": 1, "memory_mb": 64}
    assert adopting.wanted_spec("web") == {"vcpus": 1, "memory_mb": 64,
                                           "metadata": {OWNER_KEY: "web"}}
    assert problems([{"name": "a", "adopt": "maybe"}]) == {
        "vms[0].adopt": "must be true or false, not 'maybe'"}


def test_the_marker_listed_by_hand_is_refused_pointing_to_adopt():
    found = problems([{"name": "a", "metadata": {"team": "x"}},
                      {"name": "b", "metadata": {OWNER_KEY: "web"}}])
    assert list(found) == ["vms[1].metadata.%s" % OWNER_KEY]
    assert "vms[1].adopt: true" in found["vms[1].metadata.%s" % OWNER_KEY]
