"""Run real ``ansible-playbook`` processes from tests and read their per-task results.

``run_playbook(tmp_path, plays, ...)`` writes ``plays`` (a list of play dicts) as YAML with
``yaml.safe_dump``, runs ``ansible-playbook`` with the JSON stdout callback (``ansible.posix.json``)
and returns a :class:`PlaybookRun`: exit code, raw stdout/stderr, wall time and every task
result by task name. With ``shown_with`` (a stdout callback, e.g. ``default``) the run prints
what a user sees and writes the same JSON document to a file (``callbacks/json_file.py``): one
run gives both. The collection is found through ``ANSIBLE_COLLECTIONS_PATH``, which
``tests/conftest.py`` sets. Every result of a resilient.virt task is checked against its module's
RETURN: a key it does not document fails the test that ran it.
"""
import functools
import importlib
import json
import os
import subprocess
import sys
import time
from datetime import datetime

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CALLBACK = "ansible.posix.json"
CALLBACK_DIR = os.path.join(HERE, "callbacks")  # json_file: the JSON document, to a file
RESULTS_FILE_ENV = "RESILIENT_VIRT_TEST_JSON_FILE"  # where json_file writes it (its PATH_ENV)


def store_records(store_url, namespace):
    """The records of ``namespace`` in the SQLite state store ``store_url``, read with sqlite3
    (the test's own reading, not the collection's): {key: record}."""
    import sqlite3

    path = store_url[len("sqlite://"):]
    if not os.path.exists(path):
        return {}
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT key, value FROM records WHERE namespace = ?",
                          (namespace,)).fetchall()
    finally:
        db.close()
    return dict((key, json.loads(value)) for key, value in rows)


def plugin_env(*names):
    """Environment that loads the test plugins ``names`` (modules of this directory) into every
    task, inventory source and module process: RESILIENT_VIRT_PLUGINS and PYTHONPATH."""
    return {"RESILIENT_VIRT_PLUGINS": ",".join(names),
            "PYTHONPATH": os.pathsep.join(filter(None, [HERE, os.environ.get("PYTHONPATH")]))}


def local_inventory(hosts=("localhost",)):
    """An inventory dict with local hosts running modules with this test's Python."""
    entry = dict(ansible_connection="local", ansible_python_interpreter=sys.executable)
    return {"all": {"hosts": {host: dict(entry) for host in hosts}}}


def play(tasks, hosts="localhost", module_defaults=None, **extra):
    """A play dict (no fact gathering) with ``module_defaults`` for the collection's group."""
    result = {"name": "test play", "hosts": hosts, "gather_facts": False, "tasks": tasks}
    if module_defaults:
        result["module_defaults"] = {"group/resilient.virt.all": module_defaults}
    result.update(extra)
    return result


class TaskResult:
    """One task on one host: ``result`` (the module's dict), ``duration`` (seconds)."""

    def __init__(self, name, host, result, duration):
        self.name = name
        self.host = host
        self.result = result
        self.duration = duration

    def __getitem__(self, key):
        return self.result[key]

    def get(self, key, default=None):
        return self.result.get(key, default)

    @property
    def items(self):
        """Per-item results of a loop task."""
        return self.result.get("results", [])

    @property
    def failed(self):
        return bool(self.result.get("failed"))

    def __repr__(self):
        return "TaskResult(%r on %s: %s)" % (self.name, self.host, json.dumps(self.result)[:2000])


def _seconds(duration):
    """Seconds between the callback's ``start`` and ``end`` timestamps, None if unfinished."""
    def parse(text):
        return datetime.strptime(text.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")

    if not duration or not duration.get("end"):
        return None
    return (parse(duration["end"]) - parse(duration["start"])).total_seconds()


def _json_document(stdout):
    """The JSON callback's document in ``stdout`` ({} when there is none); with -v and more,
    Ansible prints its verbose lines to stdout too, before the document."""
    try:
        return json.loads(stdout)
    except ValueError:
        pass
    start = stdout.find("\n{\n")
    if start < 0:  # e.g. the JSON callback is missing: describe() shows the output
        return {}
    try:
        return json.JSONDecoder().raw_decode(stdout[start + 1:])[0]
    except ValueError:
        return {}


# keys Ansible itself puts in task results (its own documentation covers them)
ANSIBLE_KEYS = {"_ansible_no_log", "action", "changed", "failed", "msg", "invocation", "warnings",
                "deprecations", "exception", "skipped", "skip_reason", "false_condition", "diff",
                "item", "ansible_loop_var", "_ansible_item_label", "failed_when_result",
                "changed_when_result", "attempts", "retries", "censored", "module_stdout",
                "module_stderr", "rc", "ansible_job_id", "started", "finished", "results_file",
                "_ansible_verbose_always", "_ansible_ignore_errors", "stdout", "stderr",
                "stdout_lines", "stderr_lines"}


@functools.cache
def documented_keys(action):
    """The keys the RETURN of ``action`` (resilient.virt.<module>) documents."""
    module = importlib.import_module("ansible_collections.resilient.virt.plugins.modules."
                                     + action.rsplit(".", 1)[1])
    return frozenset(yaml.safe_load(module.RETURN))


def _undocumented(result):
    action = result.get("action") or ""
    if not action.startswith("resilient.virt."):
        return set()
    found = set(result) - ANSIBLE_KEYS - documented_keys(action)
    for item in result.get("results") or ():
        if isinstance(item, dict):
            found |= set(item) - ANSIBLE_KEYS - documented_keys(action)
    if result.get("results") is not None and "results" not in documented_keys(action):
        found.discard("results")  # a loop's results, Ansible's own
    return found


class PlaybookRun:
    """Outcome of one ``ansible-playbook`` run."""

    def __init__(self, rc, stdout, stderr, wall, document=None):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.wall = wall
        self.tasks = []
        # the JSON callback's document when it went to a file, not to stdout ("" otherwise)
        self.document = document or ""
        data = _json_document(document if document is not None else stdout)
        self.data = data
        for play_data in data.get("plays", []):
            for task in play_data.get("tasks", []):
                for host, result in task.get("hosts", {}).items():
                    undocumented = _undocumented(result)
                    assert not undocumented, "%s returned keys its RETURN does not document: %s" % (
                        result.get("action"), sorted(undocumented))
                    self.tasks.append(TaskResult(task["task"]["name"], host, result,
                                                 _seconds(task["task"].get("duration"))))
        self.stats = data.get("stats", {})

    @property
    def output(self):
        """stdout and stderr together, to search for things that must never be shown."""
        return self.stdout + "\n" + self.stderr

    def task(self, name, host=None):
        """The result of the task ``name`` (on ``host``); AssertionError if it did not run."""
        found = [t for t in self.tasks if t.name == name and (host is None or t.host == host)]
        assert len(found) == 1, "task %r ran %d times on %s; run: %s" % (
            name, len(found), host or "any host", self.describe())
        return found[0]

    def describe(self):
        return "rc=%s stderr=%s stdout=%s" % (self.rc, self.stderr[-3000:], self.stdout[-6000:])

    def __repr__(self):
        return "PlaybookRun(%s)" % self.describe()


def _temp_dir(tmp_path):
    path = os.path.join(tmp_path, "tmp")
    os.makedirs(path, exist_ok=True)
    return path


def run_playbook(tmp_path, plays, inventory=None, extra_vars=None, env=None, check=False,
                 diff=False, forks=None, args=(), timeout=300, name="playbook", shown_with=None):
    """Write ``plays`` to ``tmp_path/<name>.yml`` and run ``ansible-playbook`` on it.

    ``inventory``: an inventory dict (default: localhost, local connection), written as YAML.
    ``env``: extra environment variables; ``args``: extra command line arguments. A run longer
    than ``timeout`` seconds is killed and
    raises ``subprocess.TimeoutExpired``, so a hang fails the test instead of stalling it.
    ``shown_with``: the stdout callback of the run (stdout then holds what it prints); the task
    results come from the JSON document the json_file callback writes to ``<name>-results.json``
    (``PlaybookRun.document``).
    """
    tmp_path = str(tmp_path)
    playbook = os.path.join(tmp_path, name + ".yml")
    with open(playbook, "w") as f:
        yaml.safe_dump(plays, f, sort_keys=False)
    inventory_file = os.path.join(tmp_path, name + "-inventory.yml")
    with open(inventory_file, "w") as f:
        yaml.safe_dump(inventory or local_inventory(), f, sort_keys=False)
    cmd = ["ansible-playbook", "-i", inventory_file, playbook]
    if extra_vars:
        vars_file = os.path.join(tmp_path, name + "-vars.json")
        with open(vars_file, "w") as f:
            json.dump(extra_vars, f)
        cmd += ["-e", "@" + vars_file]
    if check:
        cmd.append("--check")
    if diff:
        cmd.append("--diff")
    if forks:
        cmd += ["--forks", str(forks)]
    cmd += list(args)
    environ = dict(os.environ)
    environ.update({
        "ANSIBLE_STDOUT_CALLBACK": CALLBACK,
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
        "ANSIBLE_HOST_KEY_CHECKING": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        # what a task killed on purpose cannot remove (its unpacked module) stays in the test's dir
        "TMPDIR": _temp_dir(tmp_path),
    })
    environ.update(env or {})
    results_file = None
    if shown_with:
        results_file = os.path.join(tmp_path, name + "-results.json")
        enabled = environ.get("ANSIBLE_CALLBACKS_ENABLED")
        environ.update({"ANSIBLE_STDOUT_CALLBACK": shown_with, "ANSIBLE_CALLBACK_PLUGINS": CALLBACK_DIR,
                        "ANSIBLE_CALLBACKS_ENABLED": ",".join(filter(None, ["json_file", enabled])),
                        RESULTS_FILE_ENV: results_file})
    began = time.monotonic()
    proc = subprocess.run(cmd, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=timeout, check=False)
    wall = time.monotonic() - began
    document = None
    if results_file:
        document = ""
        if os.path.exists(results_file):
            with open(results_file) as f:
                document = f.read()
    return PlaybookRun(proc.returncode, proc.stdout, proc.stderr, wall, document)
