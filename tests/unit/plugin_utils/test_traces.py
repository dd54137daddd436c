"""_traces: nothing of OpenTelemetry loaded on the default path, the task's name masked, the
protocols the export can speak."""
import json
import subprocess
import sys

import pytest

from ansible_collections.resilient.virt.plugins.plugin_utils._traces import MissingSdk, check, sdk, task_of

DEFAULT_PATH = (
    "ansible_collections.resilient.virt.plugins.callback.resilience_summary",
    "ansible_collections.resilient.virt.plugins.plugin_utils._in_process",
    "ansible_collections.resilient.virt.plugins.modules.vm_info",
)


def test_the_default_path_imports_no_opentelemetry():
    code = ("import importlib, json, sys\n"
            "for name in %r: importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'opentelemetry')))"
            % (DEFAULT_PATH,))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": ":".join(sys.path), "RESILIENT_VIRT_IN_PROCESS": "false"})
    assert json.loads(proc.stdout) == []


class _Named:
    def __init__(self, **fields):
        self.__dict__.update(fields)

    def get_name(self):
        return self.name


def test_the_task_name_is_that_of_community_general_opentelemetry_without_secrets():
    task = _Named(name=" describe with Sp4nS3cret ", args={"provider": {"password": "Sp4nS3cret"}},
                  _uuid="0242-aa", action="resilient.virt.vm_info")
    result = _Named(_task=task, _host=_Named(name="web1"))
    assert task_of(result, "site") == {
        "ansible.task.uuid": "0242-aa", "ansible.task.name": "[web1] site: describe with ********",
        "ansible.task.host.name": "web1", "ansible.task.module": "resilient.virt.vm_info"}


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"])
@pytest.mark.parametrize("function", [check, sdk])
def test_a_protocol_other_than_otlp_http_is_refused_by_name(variable, function):
    with pytest.raises(MissingSdk, match=variable + "=grpc: .*http/protobuf"):
        function({variable: "grpc"})


def test_the_traces_protocol_wins_over_the_general_one():
    otel = sdk({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    assert otel["OTLPSpanExporter"].__module__.startswith("opentelemetry.exporter.otlp.proto.http")


@pytest.mark.parametrize("function", [check, sdk])
def test_without_the_sdk_the_callback_is_told_what_to_install(monkeypatch, function):
    for name in ["opentelemetry.sdk"] + [m for m in sys.modules if m.startswith("opentelemetry.sdk.")]:
        monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    with pytest.raises(MissingSdk, match="pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http"):
        function({})


def test_the_check_finds_the_sdk_without_importing_it():
    code = ("import json, sys\n"
            "from ansible_collections.resilient.virt.plugins.plugin_utils._traces import check\n"
            "check({})\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk.'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": ":".join(sys.path)})
    assert json.loads(proc.stdout) == []
