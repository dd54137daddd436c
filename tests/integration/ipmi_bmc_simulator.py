"""An IPMI BMC simulator (no BMC runs here): pyghmi's BMC server framework (``pyghmi.ipmi.bmc``)
on 127.0.0.1, a free UDP port, one user, an optional BMC key (Kg), and a chassis whose power
state lives in a file: ``on`` or ``off``, which the tests read as their oracle and write to
power the chassis on.

Run it as a process of its own: ``python3 ipmi_bmc_simulator.py CONFIG`` where CONFIG is a JSON
file with ``username``, ``password``, ``kg`` (or null), ``power_file``, ``stuck`` (true: the
BMC accepts power down but the power stays on, a BMC whose power control is broken) and ``lab``
(null, or ``[lab_dir, run_dir, name]``: the chassis is that lab hypervisor, whose power down is
the lab's own ``down``, run after the BMC answered, as a real power supply takes a moment; the
power reads off once it is done). It prints its port on the first line of its output, then
serves until it is killed.

pyghmi's server offers only cipher suite 3 (RAKP-HMAC-SHA1) but accepts any proposal; the client
proposes SHA-256 first. The simulator refuses a proposal other than SHA-1, as a BMC without
SHA-256 does, so the client falls back to suite 3.
"""
import json
import subprocess
import os
import sys
import threading

_NO_MATCHING_AUTHENTICATION = 0x11  # RMCP+ status code: the proposed algorithm is not supported
_SHA1 = 1  # RAKP-HMAC-SHA1, the authentication algorithm of cipher suite 3


def write_power(path, state):
    """Write ``state`` to the power file at once (a reader never sees it half written)."""
    with open("%s.new" % path, "w") as power:
        power.write(state)
    os.replace("%s.new" % path, path)


def lab_power_off(lab_dir, run_dir, name, power_file):
    """Take lab hypervisor ``name`` down (every process of its namespace killed), then read off."""
    sys.path.insert(0, lab_dir)
    from lab import Lab

    Lab(run_dir).down([name])
    write_power(power_file, "off")


def serve(config):
    from pyghmi.ipmi import bmc
    from pyghmi.ipmi.private import serversession

    class Session(serversession.ServerSession):
        def create_open_session_response(self, request):
            if request[12] != _SHA1:  # the authentication algorithm of the proposal
                return bytearray([request[0], _NO_MATCHING_AUTHENTICATION, 0, 0]) + bytearray(request[4:8])
            return super().create_open_session_response(request)

    class SimulatedBmc(bmc.Bmc):
        def get_power_state(self):
            with open(config["power_file"]) as power:
                return power.read().strip()

        def power_off(self):
            if config["stuck"]:
                return
            if config.get("lab"):
                threading.Thread(target=lab_power_off, args=config["lab"] + [config["power_file"]]).start()
            else:
                write_power(config["power_file"], "off")

        def power_on(self):
            write_power(config["power_file"], "on")

        def sessionless_data(self, data, sockaddr):
            if len(data) >= 22 and data[0] == 6 and bytes(data[2:4]) == b"\xff\x07" and data[4] == 6 and data[5] == 16:
                # an RMCP+ open session request: a session of the class that checks the proposal
                Session(self.authdata, self.kg, sockaddr, self.serversocket, bytearray(data)[16:], self.uuid, bmc=self)
                return
            super().sessionless_data(data, sockaddr)

    server = SimulatedBmc({config["username"]: config["password"]}, port=0, address="127.0.0.1")
    server.port = server.serversocket.getsockname()[1]  # pyghmi routes a session's packets by it
    if config.get("kg"):
        server.set_kg(config["kg"])
    print(server.port, flush=True)
    server.listen()


class Simulator:
    """The simulator as a process of the test's own, its files in ``directory``; :meth:`stop`
    kills it."""

    def __init__(self, directory, username, password, kg=None, stuck=False, power="on", lab=None):
        self.power_file = directory / "power"
        write_power(self.power_file, power)
        config = directory / "bmc.json"
        config.write_text(json.dumps({"username": username, "password": password, "kg": kg,
                                      "power_file": str(self.power_file), "stuck": stuck,
                                      "lab": lab}))
        self.log = directory / "bmc.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen([sys.executable, __file__, str(config)],
                                            stdout=subprocess.PIPE, stderr=log, text=True)
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise AssertionError("the IPMI BMC simulator did not start; read %s" % self.log)
        self.port = int(line)

    def power(self):
        return self.power_file.read_text().strip()

    def set_power(self, state):
        write_power(self.power_file, state)

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()


if __name__ == "__main__":
    with open(sys.argv[1]) as source:
        serve(json.load(source))
