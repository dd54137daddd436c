"""An Ansible callback for the tests: ansible.posix.json's document, written to a file.

With it enabled (``ANSIBLE_CALLBACK_PLUGINS`` naming this directory, ``ANSIBLE_CALLBACKS_ENABLED``
naming ``json_file``), one ``ansible-playbook`` run prints what a user sees with its stdout
callback and writes every task's result, as the JSON stdout callback would print it, to the file
named by :data:`PATH_ENV`: a test reads both without running the play twice.
"""
import os

from ansible_collections.ansible.posix.plugins.callback.json import CallbackModule as JsonCallback

DOCUMENTATION = """
name: json_file
type: aggregate
short_description: the JSON callback's document, written to a file
description: What ansible.posix.json prints on stdout, written to the file named by RESILIENT_VIRT_TEST_JSON_FILE.
options:
  json_indent:
    description: indent of the JSON document
    type: integer
    default: 4
  show_custom_stats:
    description: include the custom stats
    type: bool
    default: false
"""

PATH_ENV = "RESILIENT_VIRT_TEST_JSON_FILE"


class _ToFile:
    """Takes the place of the callback's display for the one call that prints the document."""

    def __init__(self, path):
        self.path = path

    def display(self, text, *args, **kwargs):
        with open(self.path, "w") as handle:
            handle.write(text)


class CallbackModule(JsonCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "json_file"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_stats(self, stats):
        display, self._display = self._display, _ToFile(os.environ[PATH_ENV])
        try:
            super().v2_playbook_on_stats(stats)
        finally:
            self._display = display
