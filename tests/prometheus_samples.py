"""The metrics text read back with prometheus_client's parser: the tests' oracle of the format.

:func:`parse` gives each family's type and help and its samples; :func:`value` finds the one
sample of a name whose labels include those given (None when there is none, an assertion when
several match), so a test compares the figures with counts of its own. A bucket's ``le`` is
read as a number and written as Python writes floats (``1.0``; Go programs write ``1``).
"""
from prometheus_client.parser import text_string_to_metric_families


def parse(text):
    """{family name: {"type": ..., "help": ..., "samples": [(sample name, labels, value)]}}."""
    families = {}
    for family in text_string_to_metric_families(text):
        assert family.name not in families, "family %s appears twice" % family.name
        families[family.name] = {"type": family.type, "help": family.documentation,
                                 "samples": [(s.name, _labels(s.labels), s.value) for s in family.samples]}
    return families


def _labels(labels):
    labels = dict(labels)
    if labels.get("le", "+Inf") != "+Inf":
        labels["le"] = str(float(labels["le"]))
    return labels


def samples(families, name, **labels):
    """The samples called ``name`` whose labels include ``labels``: [(labels, value)]."""
    return [(found, number) for family in families.values()
            for sample, found, number in family["samples"]
            if sample == name and all(found.get(k) == v for k, v in labels.items())]


def value(families, name, **labels):
    """The value of the one sample ``name`` with ``labels`` (and maybe more), or None."""
    found = samples(families, name, **labels)
    assert len(found) <= 1, "%s%r matches %d samples: %r" % (name, labels, len(found), found)
    return found[0][1] if found else None
