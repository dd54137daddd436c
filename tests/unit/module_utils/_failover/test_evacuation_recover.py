"""An evacuation within one provider that can ``recover`` starts the VM of a host the provider
reports disconnected on its reservation's host that way, never through ``migrate`` (which needs
the failed host to answer); a VM of a host that answers is migrated; a VM that already runs on
its target is left alone, and check mode changes nothing. The provider here is a stand-in that
records what it was asked."""
from ansible_collections.resilient.virt.plugins.module_utils._failover.evacuation import execute_move
from ansible_collections.resilient.virt.plugins.module_utils.errors import Conflict

MOVE = {"vm": "u-1", "from_host": "esx1", "reservation": "r1", "to_host": "esx2", "priority": 0}
VM = {"name": "web", "vcpus": 1, "memory_mb": 64}


class Cluster:
    key = "vsphere:vc"
    type_name = "vsphere"
    capabilities = frozenset(("describe", "power", "migrate", "recover"))

    def __init__(self, host="esx1", state="running", refuse=None, lost=True):
        self.host, self.state, self.refuse, self.calls = host, state, refuse, []
        self.hosts = {"esx1": "disconnected" if lost else "connected", "esx2": "connected"}

    def list_hypervisors(self):
        return [{"name": name, "state": state} for name, state in self.hosts.items()]

    def describe(self, name):
        return {"name": name, "hypervisor": self.host, "state": self.state}

    def recover(self, name, hypervisor):
        self.calls.append(("recover", name, hypervisor))
        if self.refuse:
            raise self.refuse
        self.host, self.state = hypervisor, "running"
        return self.describe(name)

    def migrate(self, name, hypervisor):
        self.calls.append(("migrate", name, hypervisor))

    def power(self, name, action):
        self.calls.append(("power", name, action))


def test_the_vm_of_a_failed_host_is_recovered_not_migrated():
    cluster = Cluster()
    outcome = execute_move(MOVE, VM, cluster, cluster, False)
    assert outcome["action"] == "recover"
    assert cluster.calls == [("recover", "web", "esx2")]


def test_the_vm_of_a_host_that_answers_is_migrated():
    cluster = Cluster(lost=False)
    outcome = execute_move(MOVE, VM, cluster, cluster, False)
    assert outcome["action"] == "migrate"
    assert cluster.calls[0] == ("migrate", "web", "esx2")


def test_a_vm_that_runs_on_its_target_is_left_alone_and_check_mode_asks_nothing():
    running = Cluster(host="esx2")
    assert execute_move(MOVE, VM, running, running, False)["action"] == "none"
    planned = Cluster()
    assert execute_move(MOVE, VM, planned, planned, True)["action"] == "recover"
    assert running.calls == [] and planned.calls == []


def test_a_refused_recovery_is_a_failed_move_with_the_reason():
    cluster = Cluster(refuse=Conflict("esx2 does not see datastore ds2"))
    outcome = execute_move(MOVE, VM, cluster, cluster, False)
    assert outcome["action"] == "failed"
    assert "ds2" in outcome["error"]["message"]
