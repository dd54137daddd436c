# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Circuit breakers as Prometheus metrics, in a file for node_exporter's textfile collector.

:func:`exposition` renders breakers (dicts with ``name``, ``state`` and the ``*_total``
counters, as ``breaker.list_breakers`` gives them) in the Prometheus text exposition format
(version 0.0.4): one family per metric, each with its HELP and TYPE lines, label values escaped
as the format says (backslash, double quote, line feed). The provider key ``<type>:<name>`` gives
the ``provider_type`` and ``provider`` labels. :func:`write_textfile` replaces a file atomically
(a temporary file in the same directory, renamed), mode 0644, so the collector never reads half
a file.
"""
import os
import tempfile

__all__ = ("exposition", "write_textfile", "STATES", "PREFIX")

PREFIX = "resilient_virt_circuit_breaker_"
STATES = ("closed", "open", "half_open")
_FAMILIES = (
    ("state", "gauge", "Circuit breaker state of the provider: 1 for the current state, 0 for the others."),
    ("failures_total", "counter", "Provider failures the circuit breaker counted (unreachable, timed out)."),
    ("opened_total", "counter", "Times the circuit breaker opened."),
    ("rejected_total", "counter", "Calls the circuit breaker refused while open or half-open."),
)


def _escape_label(value):
    return str(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _escape_help(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _sample(name, labels, value):
    pairs = ",".join('%s="%s"' % (label, _escape_label(text)) for label, text in labels)
    return "%s{%s} %d" % (name, pairs, value)


def _labels(name):
    provider_type, sep, provider = str(name).partition(":")
    return (("provider_type", provider_type if sep else ""), ("provider", provider if sep else provider_type))


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def exposition(breakers):
    """The text of the metrics of ``breakers``; a breaker without a known state (``state``
    None) gets no state lines, a counter that is not a count no line."""
    lines = []
    ordered = sorted(breakers, key=lambda b: str(b.get("name")))
    for family, kind, text in _FAMILIES:
        name = PREFIX + family
        samples = []
        for breaker in ordered:
            labels = _labels(breaker.get("name"))
            if family == "state":
                if breaker.get("state") in STATES:
                    samples.extend(_sample(name, labels + (("state", state),), int(state == breaker["state"]))
                                   for state in STATES)
            elif _count(breaker.get(family)) is not None:
                samples.append(_sample(name, labels, breaker[family]))
        if samples:
            lines.extend(("# HELP %s %s" % (name, _escape_help(text)), "# TYPE %s %s" % (name, kind)))
            lines.extend(samples)
    return "".join(line + "\n" for line in lines)


def write_textfile(path, text):
    """Replace ``path`` with ``text`` atomically, mode 0644."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, temp = tempfile.mkstemp(dir=directory, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), 0o644)
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
