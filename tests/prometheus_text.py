"""A strict parser of the Prometheus text exposition format (0.0.4), the tests' own oracle.

``prometheus_client`` is not installed here (and not a dependency), so the tests check the
metrics file with this parser, written from the format's specification, not from the
collection's writer: every line is a HELP, a TYPE or a sample; a metric name matches
``[a-zA-Z_:][a-zA-Z0-9_:]*``, a label name ``[a-zA-Z_][a-zA-Z0-9_]*``; label values are quoted
with only ``\\\\``, ``\\"`` and ``\\n`` escapes; HELP and TYPE come at most once per family and
before its samples; a family's samples are not split by another family; a series (name and
label set) appears once; the file ends with a line feed.
"""
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
_ESCAPES = {"\\": "\\", "\"": "\"", "n": "\n"}


class FormatError(AssertionError):
    pass


def _labels(text, line):
    """{name: value} of a ``{...}`` body, unescaping values; FormatError when malformed."""
    labels = {}
    pos = 0
    while pos < len(text):
        match = re.compile(r"(%s)=\"" % LABEL).match(text, pos)
        if not match:
            raise FormatError("bad label at %r in %r" % (text[pos:], line))
        name, pos = match.group(1), match.end()
        value = []
        while True:
            if pos >= len(text):
                raise FormatError("unterminated label value in %r" % line)
            char = text[pos]
            if char == "\\":
                if pos + 1 >= len(text) or text[pos + 1] not in _ESCAPES:
                    raise FormatError("bad escape in %r" % line)
                value.append(_ESCAPES[text[pos + 1]])
                pos += 2
            elif char == "\"":
                pos += 1
                break
            elif char == "\n":
                raise FormatError("raw line feed in a label value: %r" % line)
            else:
                value.append(char)
                pos += 1
        if name in labels:
            raise FormatError("label %s twice in %r" % (name, line))
        labels[name] = "".join(value)
        if pos < len(text):
            if text[pos] != ",":
                raise FormatError("expected a comma at %r in %r" % (text[pos:], line))
            pos += 1
    return labels


def _value(text, line):
    if text in ("+Inf", "-Inf", "NaN"):
        return float(text)
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text):
        raise FormatError("bad value %r in %r" % (text, line))
    return float(text)


def parse(text):
    """{family: {"help", "type", "samples": [(name, labels, value)]}}; FormatError otherwise."""
    if text and not text.endswith("\n"):
        raise FormatError("the text does not end with a line feed")
    families = {}
    closed = set()
    current = None
    series = set()
    for line in text.split("\n")[:-1] if text else []:
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6], line[7:]
            name, sep, value = rest.partition(" ")
            if not re.fullmatch(NAME, name) or not sep:
                raise FormatError("bad %s line %r" % (kind, line))
            family = families.setdefault(name, {"help": None, "type": None, "samples": []})
            if name in closed or family["samples"]:
                raise FormatError("%s of %s after its samples or another family" % (kind, name))
            key = kind.lower()
            if family[key] is not None:
                raise FormatError("second %s line for %s" % (kind, name))
            if kind == "TYPE" and value not in TYPES:
                raise FormatError("unknown type in %r" % line)
            if kind == "HELP" and re.search(r"\\[^\\n]", value.replace("\\\\", "")):
                raise FormatError("bad escape in %r" % line)
            family[key] = value
            if current is not None and current != name:
                closed.add(current)
            current = name
            continue
        if line.startswith("#"):
            continue  # a comment
        match = re.fullmatch(r"(%s)(?:\{(.*)\})? ([^ ]+)(?: (-?\d+))?" % NAME, line)
        if not match:
            raise FormatError("bad sample line %r" % line)
        name, body, value = match.group(1), match.group(2), match.group(3)
        labels = _labels(body or "", line)
        family_name = name
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if base != name and families.get(base, {}).get("type") in ("histogram", "summary"):
            family_name = base
        if family_name != current:
            if current is not None:
                closed.add(current)
            if family_name in closed:
                raise FormatError("the samples of %s are split by another family" % family_name)
            current = family_name
        identity = (name, tuple(sorted(labels.items())))
        if identity in series:
            raise FormatError("series %r twice" % (identity,))
        series.add(identity)
        families.setdefault(family_name, {"help": None, "type": None, "samples": []})["samples"].append(
            (name, labels, _value(value, line)))
    return families


def value(families, name, **labels):
    """The value of the sample ``name`` whose labels include ``labels``; exactly one must match."""
    found = [v for family in families.values() for n, have, v in family["samples"]
             if n == name and all(have.get(k) == w for k, w in labels.items())]
    if len(found) != 1:
        raise AssertionError("%d samples of %s with %s" % (len(found), name, labels))
    return found[0]
