"""The breaker metrics file, checked by the tests' own strict parser of the text format."""
import os
import stat

import pytest

from ansible_collections.resilient.virt.plugins.plugin_utils._breaker_metrics import (
    exposition, write_textfile)

from prometheus_text import FormatError, parse, value

NASTY = 'lab "one"\\two\nthree'
BREAKERS = [
    {"name": "libvirt:hv1", "state": "open", "failures_total": 7, "opened_total": 2, "rejected_total": 11},
    {"name": "vsphere:" + NASTY, "state": "half_open", "failures_total": 0, "opened_total": 0,
     "rejected_total": 0},
    {"name": "libvirt:hv2", "state": None, "failures_total": 1, "opened_total": True, "rejected_total": 3},
]


def test_every_breaker_in_four_families_with_help_and_type():
    families = parse(exposition(BREAKERS))
    prefix = "resilient_virt_circuit_breaker_"
    assert {name: family["type"] for name, family in families.items()} == {
        prefix + "state": "gauge", prefix + "failures_total": "counter",
        prefix + "opened_total": "counter", prefix + "rejected_total": "counter"}
    assert all(family["help"] for family in families.values())
    state = prefix + "state"
    assert [value(families, state, provider="hv1", state=s) for s in ("closed", "open", "half_open")] == [0, 1, 0]
    assert value(families, state, provider_type="vsphere", provider=NASTY, state="half_open") == 1
    assert value(families, prefix + "failures_total", provider_type="libvirt", provider="hv1") == 7
    assert value(families, prefix + "opened_total", provider="hv1") == 2
    assert value(families, prefix + "rejected_total", provider="hv1") == 11
    assert value(families, prefix + "rejected_total", provider="hv2") == 3
    # a state nobody knows and a counter that is not a count give no line
    assert not [s for s in families[state]["samples"] if s[1]["provider"] == "hv2"]
    assert not [s for s in families[prefix + "opened_total"]["samples"] if s[1]["provider"] == "hv2"]


def test_no_breakers_is_an_empty_file():
    assert exposition([]) == "" and parse("") == {}


@pytest.mark.parametrize("bad", [
    'm{a="x} 1\n', 'm{a="\\q"} 1\n', 'm 1', '# TYPE m counter\nm 1\n# TYPE m counter\n',
    'm{a="1"} 1\nn 1\nm{a="2"} 1\n', 'm 1\nm 1\n', "m{a=\"x\ny\"} 1\n"])
def test_the_oracle_refuses_broken_text(bad):
    with pytest.raises(FormatError):
        parse(bad)


def test_the_file_is_replaced_whole_and_readable_by_all(tmp_path):
    path = tmp_path / "resilient_virt.prom"
    path.write_text("old\n")
    os.chmod(path, 0o600)
    write_textfile(str(path), exposition(BREAKERS))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert parse(path.read_text()) == parse(exposition(BREAKERS))
    assert sorted(os.listdir(tmp_path)) == ["resilient_virt.prom"]  # no temporary file left


def test_a_missing_directory_raises_and_leaves_nothing(tmp_path):
    with pytest.raises(OSError):
        write_textfile(str(tmp_path / "nowhere" / "m.prom"), "x 1\n")
    assert os.listdir(tmp_path) == []
