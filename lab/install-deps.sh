#!/bin/sh
# Install what the lab and the test suite need on Debian 12 (run as root; idempotent).
#
# - libvirt + QEMU (TCG) for the lab hypervisors, virsh, headers to build libvirt-python,
# - qemu-utils (qemu-img, qemu-io) to write and check disk images in the backup tests,
# - redis-server, redis-sentinel and openssl (test certificates) for the Redis state store tests,
# - openssh-server and openssh-client for the qemu+ssh:// connection test (sshd on loopback),
# - shellcheck for ansible-test sanity,
# - Go and govmomi (with its simulator package) to build the vSphere API simulator, and patch to
#   apply lab/vcsim/*.patch to a copy of that package (lab/vcsim.py builds from the copy).
# - prometheus (with promtool), prometheus-node-exporter and prometheus-pushgateway for the tests
#   of the metrics against the real thing (each test starts its own, never the system service).
# - openjdk-17-jre-headless: the Java ansible-rulebook's rule engine (drools) runs on, for the
#   tests of the hypervisor_events source under a real ansible-rulebook.
#
# apt runs only when a package is missing (apt-get update only then). No service is started
# by the installation: the lab starts its own daemons in private mount namespaces.
set -eu

PACKAGES="libvirt-daemon-system qemu-system-x86 qemu-utils libvirt-clients libvirt-dev pkg-config gcc
libc6-dev redis-server redis-sentinel openssh-server openssh-client openssl golang-go golang-github-vmware-govmomi-dev patch shellcheck
prometheus prometheus-node-exporter prometheus-pushgateway openjdk-17-jre-headless"

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps.sh: run as root" >&2
    exit 1
fi

missing=""
for pkg in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $pkg"
    fi
done

if [ -n "$missing" ]; then
    echo "install-deps.sh: installing$missing"
    # keep invoke-rc.d from starting libvirtd/redis during the installation
    policy=/usr/sbin/policy-rc.d
    made_policy=""
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod 755 "$policy"
        made_policy=1
        trap 'rm -f "$policy"' EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    # shellcheck disable=SC2086
    apt-get install -y -q -o Dpkg::Options::=--force-confnew $missing
    if [ -n "$made_policy" ]; then
        rm -f "$policy"
        trap - EXIT
    fi
else
    echo "install-deps.sh: all packages present"
fi

# Mount points the lab binds each hypervisor's private directories over.
mkdir -p /etc/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt

for cmd in unshare nsenter mount libvirtd virtlogd qemu-system-x86_64 qemu-img qemu-io virsh redis-server redis-sentinel sshd ssh-keygen go patch prometheus promtool prometheus-node-exporter prometheus-pushgateway; do
    command -v "$cmd" >/dev/null 2>&1 || { echo "install-deps.sh: $cmd still missing" >&2; exit 1; }
done
[ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ] || [ -x /usr/lib/jvm/java-17-openjdk-arm64/bin/java ] || {
    echo "install-deps.sh: Java 17 (openjdk-17-jre-headless) still missing" >&2; exit 1; }
