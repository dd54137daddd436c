// Command vcsim serves a simulated vCenter (govmomi's simulator) for the local lab.
//
// The default inventory is one datacenter with two clusters (they act as availability
// zones), three hosts per cluster, two VMs per cluster and one shared local datastore.
// Hosts get realistic sizes, varied usage figures and a "traits" custom attribute. The first VM
// (by name) of each cluster runs VMware Tools (see guestTools); the other VMs report no guest
// information, like VMs without Tools. Every VM reports the snapshot capability a VM on vCenter
// does (see snapshotCapability). Clones and relocations end as on vCenter (see soapFixes).
//
// It serves plain HTTP (the SOAP API at /sdk, and the vSphere Automation REST API with tagging
// at /rest, as vCenter does; -rest=false leaves it out, as on an ESXi host), or HTTPS with a
// self-signed certificate with -tls (a P-256 key made at start, for 127.0.0.1, ::1 and
// localhost: trusting it lets clients verify the server), or HTTPS with the certificate and key
// of the PEM files -tls-cert and -tls-key (e.g. one signed by a lab CA), on a loopback address
// only. The
// password is read from the VCSIM_PASSWORD environment variable (kept out of the process list)
// unless -password is given; both APIs accept only that user name and password (govmomi's REST
// simulator alone would accept any non-empty ones: see checkRESTLogin). The first line on
// stdout is the service URL without credentials; -url-file writes the same URL to a file (mode
// 0600, written atomically).
// POST /lab/host-connection sets a host's runtime.connectionState, and its VMs' (see
// hostConnection): what a host that died shows its vCenter, which no SOAP call of the simulator
// can bring about; lab-only, and so is unregistering such a host's disconnected VMs (see
// beforeUnregister).
// SIGTERM or SIGINT stops the server and removes the simulated datastore directories.
package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io/ioutil"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"
	_ "github.com/vmware/govmomi/vapi/simulator" // the REST API, registered as an endpoint
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// restSessionPath is where REST clients log in (POST with basic auth) and out (DELETE).
const restSessionPath = "/rest/com/vmware/cis/session"

type options struct {
	listen     string
	urlFile    string
	username   string
	password   string
	datacenter int
	cluster    int
	hosts      int
	standalone int
	vms        int
	datastores int
	hostCores  int
	hostMemGB  int
	autostart  bool
	traits     bool
	delayMS    int
	jitter     float64
	slow       string
	tls        bool
	tlsCert    string
	tlsKey     string
	rest       bool
}

func parseFlags() options {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "loopback address to listen on (port 0 = any free port)")
	flag.StringVar(&o.urlFile, "url-file", "", "also write the service URL to this file")
	flag.StringVar(&o.username, "username", "user", "the only user name accepted by Login")
	flag.StringVar(&o.password, "password", "", "the only password accepted by Login (default: $VCSIM_PASSWORD)")
	flag.IntVar(&o.datacenter, "dc", 1, "number of datacenters")
	flag.IntVar(&o.cluster, "cluster", 2, "number of clusters per datacenter")
	flag.IntVar(&o.hosts, "host", 3, "number of hosts per cluster")
	flag.IntVar(&o.standalone, "standalone-host", 0, "number of standalone hosts per datacenter")
	flag.IntVar(&o.vms, "vm", 2, "number of VMs per cluster (and per standalone host)")
	flag.IntVar(&o.datastores, "ds", 1, "number of local datastores shared by all hosts")
	flag.IntVar(&o.hostCores, "host-cores", 16, "CPU cores per host")
	flag.IntVar(&o.hostMemGB, "host-memory-gb", 128, "memory per host in GiB")
	flag.BoolVar(&o.autostart, "autostart", true, "power on the VMs of the initial inventory")
	flag.BoolVar(&o.traits, "traits", true, "set a \"traits\" custom attribute on hosts")
	flag.IntVar(&o.delayMS, "delay", 0, "delay every SOAP call by this many milliseconds")
	flag.Float64Var(&o.jitter, "jitter", 0, "delay jitter as a coefficient of variation")
	flag.StringVar(&o.slow, "method-delay", "", "delay these SOAP methods by milliseconds, as Method=ms,... (e.g. ReconfigVM_Task=3000): a vCenter slow at one thing")
	flag.BoolVar(&o.tls, "tls", false, "serve HTTPS with a self-signed certificate (for clients that only speak HTTPS)")
	flag.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with the certificate (chain) of this PEM file; needs -tls-key")
	flag.StringVar(&o.tlsKey, "tls-key", "", "the private key (PEM) of -tls-cert")
	flag.BoolVar(&o.rest, "rest", true, "serve the vSphere Automation REST API (tags) at /rest, as vCenter does; false: SOAP only, as an ESXi host")
	flag.Parse()
	if o.password == "" {
		o.password = os.Getenv("VCSIM_PASSWORD")
	}
	return o
}

// checkLoopback refuses any listen address that is not a loopback IP or "localhost".
func checkLoopback(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("-listen %q: %v (expected host:port, e.g. 127.0.0.1:0)", listen, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-listen %q: only loopback addresses are allowed (127.0.0.1 or ::1)", listen)
	}
	return nil
}

// sizeHosts sets the template every simulated host is copied from.
func sizeHosts(o options) {
	memory := int64(o.hostMemGB) << 30
	hw := esx.HostSystem.Summary.Hardware
	hw.NumCpuCores = int16(o.hostCores)
	hw.NumCpuThreads = int16(o.hostCores * 2)
	hw.NumCpuPkgs = 2
	hw.CpuMhz = 2400
	hw.MemorySize = memory
	esx.HostHardwareInfo.CpuInfo.NumCpuCores = int16(o.hostCores)
	esx.HostHardwareInfo.CpuInfo.NumCpuThreads = int16(o.hostCores * 2)
	esx.HostHardwareInfo.CpuInfo.Hz = 2400 * 1000 * 1000
	esx.HostHardwareInfo.MemorySize = memory
}

// sortedHosts returns the simulated hosts ordered by name.
func sortedHosts() []*simulator.HostSystem {
	var hosts []*simulator.HostSystem
	for _, e := range simulator.Map.All("HostSystem") {
		if h, ok := e.(*simulator.HostSystem); ok {
			hosts = append(hosts, h)
		}
	}
	sort.Slice(hosts, func(i, j int) bool { return hosts[i].Name < hosts[j].Name })
	return hosts
}

// varyUsage gives each host a different, deterministic load (between 10% and 55%).
func varyUsage(o options) {
	for i, h := range sortedHosts() {
		share := 10 + (i*17)%46
		h.Summary.QuickStats.OverallCpuUsage = int32(o.hostCores * 2400 * share / 100)
		h.Summary.QuickStats.OverallMemoryUsage = int32(o.hostMemGB * 1024 * share / 100)
	}
}

// hostTraits names the traits of the i-th host: every host has "ssd"; every third also "gpu".
func hostTraits(i int) string {
	traits := []string{"ssd"}
	if i%3 == 0 {
		traits = append(traits, "gpu")
	}
	return strings.Join(traits, ",")
}

// setTraits stores each host's traits in the "traits" custom attribute, through the API.
func setTraits(ctx context.Context, u *url.URL) error {
	c, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		return err
	}
	defer func() { _ = c.Logout(ctx) }()
	m, err := object.GetCustomFieldsManager(c.Client)
	if err != nil {
		return err
	}
	def, err := m.Add(ctx, "traits", "HostSystem", nil, nil)
	if err != nil {
		return err
	}
	for i, h := range sortedHosts() {
		if err := m.Set(ctx, h.Reference(), def.Key, hostTraits(i)); err != nil {
			return err
		}
	}
	return nil
}

// toolsGuest is what VMware Tools report from inside a guest: its host name, its OS and one IPv4
// address per NIC (in the order of guest.net), while the VM is powered on.
type toolsGuest struct {
	vm       *simulator.VirtualMachine
	hostName string
	fullName string
	ips      []string
}

// report publishes what vCenter shows of a guest with Tools: running, its addresses; powered off,
// Tools not running and no addresses (the host name and OS stay as last reported).
func (g *toolsGuest) report(poweredOn bool) {
	running, status, state, primary := "guestToolsNotRunning", types.VirtualMachineToolsStatusToolsNotRunning, "notRunning", ""
	if poweredOn {
		running, status, state, primary = "guestToolsRunning", types.VirtualMachineToolsStatusToolsOk, "running", g.ips[0]
	}
	nics := make([]types.GuestNicInfo, len(g.vm.Guest.Net))
	copy(nics, g.vm.Guest.Net)
	for i := range nics {
		nics[i].IpAddress, nics[i].IpConfig = nil, nil
		if poweredOn && i < len(g.ips) {
			nics[i].IpAddress = []string{g.ips[i]}
			nics[i].IpConfig = &types.NetIpConfigInfo{IpAddress: []types.NetIpConfigInfoIpAddress{
				{IpAddress: g.ips[i], PrefixLength: 24, State: "preferred"}}}
		}
	}
	simulator.Map.Update(g.vm, []types.PropertyChange{
		{Name: "guest.toolsRunningStatus", Val: running},
		{Name: "guest.toolsStatus", Val: status},
		{Name: "guest.toolsVersion", Val: "12352"},
		{Name: "guest.guestState", Val: state},
		{Name: "guest.guestFullName", Val: g.fullName},
		{Name: "guest.hostName", Val: g.hostName},
		{Name: "guest.ipAddress", Val: primary},
		{Name: "guest.net", Val: nics},
		{Name: "summary.guest.toolsStatus", Val: status},
		{Name: "summary.guest.toolsRunningStatus", Val: running},
		{Name: "summary.guest.guestFullName", Val: g.fullName},
		{Name: "summary.guest.hostName", Val: g.hostName},
		{Name: "summary.guest.ipAddress", Val: primary},
	})
}

// toolsHandler follows the power state of the VMs with Tools (a Registry handler, called on
// every property change of the inventory).
type toolsHandler map[types.ManagedObjectReference]*toolsGuest

func (h toolsHandler) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "LabGuestTools", Value: "lab-guest-tools"}
}

func (h toolsHandler) PutObject(mo.Reference) {}

func (h toolsHandler) RemoveObject(types.ManagedObjectReference) {}

func (h toolsHandler) UpdateObject(obj mo.Reference, changes []types.PropertyChange) {
	g := h[obj.Reference()]
	if g == nil {
		return
	}
	for _, change := range changes {
		if change.Name == "runtime.powerState" {
			g.report(fmt.Sprint(change.Val) == string(types.VirtualMachinePowerStatePoweredOn))
		}
	}
}

// guestTools makes the first VM (by name) of each cluster run VMware Tools, which govmomi's
// simulator leaves out: the guest's host name is the VM's name in lower case with "-" for "_",
// its OS "Debian GNU/Linux 12 (64-bit)", and its i-th NIC has the address 192.0.2.<10*n+i>
// for the n-th such VM (TEST-NET-1, never routed).
func guestTools() {
	var clusters []*simulator.ClusterComputeResource
	for _, e := range simulator.Map.All("ClusterComputeResource") {
		clusters = append(clusters, e.(*simulator.ClusterComputeResource))
	}
	sort.Slice(clusters, func(i, j int) bool { return clusters[i].Name < clusters[j].Name })
	handler := toolsHandler{}
	for n, cluster := range clusters {
		var first *simulator.VirtualMachine
		for _, ref := range cluster.Host {
			for _, vmRef := range simulator.Map.Get(ref).(*simulator.HostSystem).Vm {
				vm := simulator.Map.Get(vmRef).(*simulator.VirtualMachine)
				if first == nil || vm.Name < first.Name {
					first = vm
				}
			}
		}
		if first == nil {
			continue
		}
		g := &toolsGuest{vm: first, fullName: "Debian GNU/Linux 12 (64-bit)",
			hostName: strings.ToLower(strings.ReplaceAll(first.Name, "_", "-"))}
		for i := range first.Guest.Net {
			g.ips = append(g.ips, fmt.Sprintf("192.0.2.%d", 10*(n+1)+i))
		}
		if len(g.ips) == 0 {
			continue
		}
		handler[first.Self] = g
		g.report(first.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn)
	}
	simulator.Map.AddHandler(handler)
}

// snapshotCapability sets what vCenter reports of a VM's snapshots: every kind supported, with
// memory and quiesced included. govmomi 0.24.2's simulator leaves a VM's capability empty, and
// clients that read it (community.vmware's vmware_guest_snapshot) then take neither.
func snapshotCapability(vm *simulator.VirtualMachine) {
	c := &vm.Capability
	c.SnapshotOperationsSupported, c.MultipleSnapshotsSupported, c.SnapshotConfigSupported = true, true, true
	c.PoweredOffSnapshotsSupported, c.MemorySnapshotsSupported, c.RevertToSnapshotSupported = true, true, true
	c.QuiescedSnapshotsSupported = true
}

// capabilityHandler gives the snapshot capability to every VM made after the start (a Registry
// handler, called when an object is added to the inventory).
type capabilityHandler struct{}

func (capabilityHandler) Reference() types.ManagedObjectReference {
	return types.ManagedObjectReference{Type: "LabCapability", Value: "lab-capability"}
}

func (capabilityHandler) PutObject(obj mo.Reference) {
	if vm, ok := obj.(*simulator.VirtualMachine); ok {
		snapshotCapability(vm)
	}
}

func (capabilityHandler) RemoveObject(types.ManagedObjectReference) {}

func (capabilityHandler) UpdateObject(mo.Reference, []types.PropertyChange) {}

// snapshotCapabilities gives every VM, of the initial inventory and made later, the snapshot
// capability vCenter reports.
func snapshotCapabilities() {
	for _, e := range simulator.Map.All("VirtualMachine") {
		snapshotCapability(e.(*simulator.VirtualMachine))
	}
	simulator.Map.AddHandler(capabilityHandler{})
}

// soapFixes makes the SOAP API end clones and relocations as vCenter does, where govmomi
// 0.24.2's simulator falls short. The simulator runs a task before it answers the call that
// started it, so the fix is made once it has answered, before the answer is passed on:
//   - CloneVM_Task puts the clone on spec.location.host (the simulator keeps the source's host);
//   - after CloneVM_Task and RelocateVM_Task the VM is listed by its host, resource pool and
//     datastores only (the simulator leaves it listed by the old ones, or by none);
//   - RelocateVM_Task to another datastore moves the VM's directory there and rewrites the paths
//     of its files, as storage vMotion does (the simulator only changes the VM's datastore list;
//     disks outside the VM's directory stay where they are);
//   - CreateSnapshot_Task without memory records the snapshot's state as poweredOff, the state
//     a revert to it brings back (the simulator records the VM's power state);
//   - RevertToSnapshot_Task leaves the VM in the snapshot's state: powered on for a snapshot
//     with memory (unless suppressPowerOn), powered off without (the simulator keeps the VM's
//     power state as it was).
//
// Calls reach it through host name patterns (127.0.0.1, localhost and ::1/sdk), which
// http.ServeMux prefers to the simulator's own /sdk pattern.
func soapFixes(s *simulator.Service) {
	inner, _ := s.ServeMux.Handler(&http.Request{URL: &url.URL{Path: "/sdk"}})
	fix := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := ioutil.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.Body = ioutil.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte("UnregisterVM")) {
			if method, err := simulator.UnmarshalBody(types.TypeFunc(), body); err == nil {
				if req, ok := method.Body.(*types.UnregisterVM); ok {
					beforeUnregister(req)
				}
			}
		}
		if !bytes.Contains(body, []byte("CloneVM_Task")) && !bytes.Contains(body, []byte("RelocateVM_Task")) &&
			!bytes.Contains(body, []byte("Snapshot_Task")) {
			inner.ServeHTTP(w, r)
			return
		}
		answer := httptest.NewRecorder()
		inner.ServeHTTP(answer, r)
		if method, err := simulator.UnmarshalBody(types.TypeFunc(), body); err == nil {
			switch req := method.Body.(type) {
			case *types.CloneVM_Task:
				afterClone(req)
			case *types.RelocateVM_Task:
				afterRelocate(req)
			case *types.CreateSnapshot_Task:
				afterSnapshot(req)
			case *types.RevertToSnapshot_Task:
				afterRevert(req)
			}
		}
		for key, values := range answer.Header() {
			w.Header()[key] = values
		}
		w.WriteHeader(answer.Code)
		_, _ = w.Write(answer.Body.Bytes())
	})
	for _, host := range []string{"127.0.0.1", "localhost", "::1"} {
		s.Handle(host+"/sdk", fix)
	}
}

// beforeUnregister lets a disconnected VM (its host set notResponding or disconnected through
// /lab/host-connection) be removed from the inventory: lab-only. govmomi 0.24.2's UnregisterVM
// refuses a VM whose last known power state is poweredOn; vCenter's documented refusal is of a
// VM that runs, and a disconnected VM's power state is only the last one its host reported.
// That vCenter unregisters a disconnected VM (what an administrator does for a failed host's VM:
// "Remove from Inventory") is assumed, not shown here: see docs/ha.md. The VM is marked poweredOff
// just before govmomi removes it, so nothing of it is seen.
func beforeUnregister(req *types.UnregisterVM) {
	vm, ok := simulator.Map.Get(req.This).(*simulator.VirtualMachine)
	if !ok || vm.Runtime.ConnectionState != types.VirtualMachineConnectionStateDisconnected {
		return
	}
	simulator.Map.WithLock(vm, func() {
		simulator.Map.Update(vm, []types.PropertyChange{
			{Name: "runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOff},
			{Name: "summary.runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOff}})
	})
}

func afterClone(req *types.CloneVM_Task) {
	folder, ok := simulator.Map.Get(req.Folder).(*simulator.Folder)
	if !ok {
		return
	}
	vm, ok := simulator.Map.FindByName(req.Name, folder.ChildEntity).(*simulator.VirtualMachine)
	if !ok { // the clone failed
		return
	}
	if host := req.Spec.Location.Host; host != nil && *vm.Runtime.Host != *host {
		simulator.Map.WithLock(vm, func() {
			simulator.Map.Update(vm, []types.PropertyChange{
				{Name: "runtime.host", Val: host}, {Name: "summary.runtime.host", Val: host}})
		})
	}
	listVM(vm)
}

func afterRelocate(req *types.RelocateVM_Task) {
	vm, ok := simulator.Map.Get(req.This).(*simulator.VirtualMachine)
	if !ok {
		return
	}
	if ref := req.Spec.Datastore; ref != nil {
		simulator.Map.WithLock(vm, func() { moveFiles(vm, simulator.Map.Get(*ref).(*simulator.Datastore)) })
	}
	listVM(vm)
}

// snapshotNode is the node of snapshot ref in a VM's snapshot tree, or nil.
func snapshotNode(tree []types.VirtualMachineSnapshotTree, ref types.ManagedObjectReference) *types.VirtualMachineSnapshotTree {
	for i := range tree {
		if tree[i].Snapshot == ref {
			return &tree[i]
		}
		if found := snapshotNode(tree[i].ChildSnapshotList, ref); found != nil {
			return found
		}
	}
	return nil
}

func afterSnapshot(req *types.CreateSnapshot_Task) {
	vm, ok := simulator.Map.Get(req.This).(*simulator.VirtualMachine)
	if !ok || req.Memory {
		return
	}
	simulator.Map.WithLock(vm, func() {
		if vm.Snapshot == nil || vm.Snapshot.CurrentSnapshot == nil {
			return
		}
		if node := snapshotNode(vm.Snapshot.RootSnapshotList, *vm.Snapshot.CurrentSnapshot); node != nil {
			node.State = types.VirtualMachinePowerStatePoweredOff
		}
	})
}

func afterRevert(req *types.RevertToSnapshot_Task) {
	snapshot, ok := simulator.Map.Get(req.This).(*simulator.VirtualMachineSnapshot)
	if !ok {
		return
	}
	vm, ok := simulator.Map.Get(snapshot.Vm).(*simulator.VirtualMachine)
	if !ok || vm.Snapshot == nil {
		return
	}
	node := snapshotNode(vm.Snapshot.RootSnapshotList, snapshot.Self)
	if node == nil {
		return
	}
	state := node.State
	if state == types.VirtualMachinePowerStatePoweredOn && req.SuppressPowerOn != nil && *req.SuppressPowerOn {
		state = types.VirtualMachinePowerStatePoweredOff
	}
	if vm.Runtime.PowerState != state {
		simulator.Map.WithLock(vm, func() {
			simulator.Map.Update(vm, []types.PropertyChange{
				{Name: "runtime.powerState", Val: state},
				{Name: "summary.runtime.powerState", Val: state}})
		})
	}
}

// listVM makes every host, resource pool and datastore list vm exactly when it is on them.
func listVM(vm *simulator.VirtualMachine) {
	member := func(obj mo.Reference, list *[]types.ManagedObjectReference, in bool) {
		if in {
			simulator.Map.AddReference(obj, list, vm.Self)
		} else {
			simulator.Map.RemoveReference(obj, list, vm.Self)
		}
	}
	for _, e := range simulator.Map.All("HostSystem") {
		h := e.(*simulator.HostSystem)
		member(h, &h.Vm, vm.Runtime.Host != nil && *vm.Runtime.Host == h.Self)
	}
	for _, e := range simulator.Map.All("ResourcePool") {
		p := e.(*simulator.ResourcePool)
		member(p, &p.Vm, vm.ResourcePool != nil && *vm.ResourcePool == p.Self)
	}
	for _, e := range simulator.Map.All("Datastore") {
		d := e.(*simulator.Datastore)
		member(d, &d.Vm, simulator.FindReference(vm.Datastore, d.Self) != nil)
	}
}

// moveFiles moves the directory of vm's configuration file to datastore to (named like the
// source directory, with " (n)" added when taken) and rewrites the paths that lie in it.
func moveFiles(vm *simulator.VirtualMachine, to *simulator.Datastore) {
	var config object.DatastorePath
	if !config.FromString(vm.Config.Files.VmPathName) || config.Datastore == to.Name {
		return
	}
	host := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
	from, ok := simulator.Map.FindByName(config.Datastore, host.Datastore).(*simulator.Datastore)
	if !ok {
		return
	}
	dir := path.Dir(config.Path)
	base := to.Info.GetDatastoreInfo().Url
	name := dir
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(base, name)); os.IsNotExist(err) {
			break
		}
		name = fmt.Sprintf("%s (%d)", dir, i)
	}
	if err := os.Rename(filepath.Join(from.Info.GetDatastoreInfo().Url, dir), filepath.Join(base, name)); err != nil {
		log.Printf("storage vMotion of %s: %v", vm.Name, err)
		return
	}
	old, moved := fmt.Sprintf("[%s] %s", from.Name, dir), fmt.Sprintf("[%s] %s", to.Name, name)
	rewrite := func(p string) string {
		if p == old || strings.HasPrefix(p, old+"/") {
			return moved + p[len(old):]
		}
		return p
	}
	files := vm.Config.Files
	files.VmPathName, files.LogDirectory = rewrite(files.VmPathName), rewrite(files.LogDirectory)
	files.SnapshotDirectory, files.SuspendDirectory = rewrite(files.SnapshotDirectory), rewrite(files.SuspendDirectory)
	devices := vm.Config.Hardware.Device
	for _, device := range devices {
		if disk, ok := device.(*types.VirtualDisk); ok {
			if backing, ok := disk.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok {
				info := backing.GetVirtualDeviceFileBackingInfo()
				info.FileName = rewrite(info.FileName)
			}
		}
	}
	for i := range vm.LayoutEx.File {
		vm.LayoutEx.File[i].Name = rewrite(vm.LayoutEx.File[i].Name)
	}
	simulator.Map.Update(vm, []types.PropertyChange{
		{Name: "config.files", Val: files},
		{Name: "config.hardware.device", Val: devices},
		{Name: "summary.config.vmPathName", Val: files.VmPathName},
		{Name: "layoutEx.file", Val: vm.LayoutEx.File},
	})
}

// methodDelays parses -method-delay: Method=ms pairs, comma separated.
func methodDelays(text string) (map[string]int, error) {
	delays := map[string]int{}
	for _, item := range strings.Split(text, ",") {
		if item == "" {
			continue
		}
		parts := strings.SplitN(item, "=", 2)
		ms, err := strconv.Atoi(strings.TrimSpace(parts[len(parts)-1]))
		if len(parts) != 2 || err != nil || ms < 0 {
			return nil, fmt.Errorf("-method-delay %q: expected Method=milliseconds, e.g. ReconfigVM_Task=3000", item)
		}
		delays[strings.TrimSpace(parts[0])] = ms
	}
	return delays, nil
}

// checkRESTLogin puts a check of the user name and password in front of the REST login.
// govmomi 0.24.2's REST simulator accepts any non-empty user name and password; vCenter
// answers 401 to wrong ones, and so does this check. Requests with a session id are left to
// the simulator, which answers 401 to an unknown id.
func checkRESTLogin(s *simulator.Service, username, password string) {
	rest, _ := s.ServeMux.Handler(&http.Request{URL: &url.URL{Path: restSessionPath}})
	s.Handle(restSessionPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Query().Get("~action") == "" {
			u, p, ok := r.BasicAuth()
			if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(username)) != 1 ||
				subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		rest.ServeHTTP(w, r)
	}))
}

// hostConnection serves POST /lab/host-connection (basic auth with the simulator's user name and
// password; form fields host, a host's name, and state: connected, disconnected or
// notResponding), which sets that host's runtime.connectionState as vCenter does when it loses
// a host (notResponding), and property collectors see the change. The host's VMs get what
// vCenter shows for the VMs of a host it does not reach: runtime.connectionState disconnected
// (connected again with their host), their power state left at the last one known. govmomi
// 0.24.2's simulator implements neither DisconnectHost_Task nor ReconnectHost_Task, and no call
// makes a host stop responding; this lab-only endpoint stands in for the host's failure and
// return. A disconnected VM may then be unregistered (lab-only, see beforeUnregister).
// labRequest answers a request to a lab-only endpoint that is not a POST with the simulator's
// user name and password (401 or 405) and returns false; true when the endpoint may act.
func labRequest(w http.ResponseWriter, r *http.Request, username, password string) bool {
	u, p, ok := r.BasicAuth()
	if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(username)) != 1 ||
		subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
		w.WriteHeader(http.StatusUnauthorized)
		return false
	}
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return false
	}
	return true
}

func hostConnection(s *simulator.Service, username, password string) {
	s.Handle("/lab/host-connection", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !labRequest(w, r, username, password) {
			return
		}
		state := types.HostSystemConnectionState(r.FormValue("state"))
		switch state {
		case types.HostSystemConnectionStateConnected, types.HostSystemConnectionStateDisconnected,
			types.HostSystemConnectionStateNotResponding:
		default:
			http.Error(w, "state must be connected, disconnected or notResponding", http.StatusBadRequest)
			return
		}
		for _, entity := range simulator.Map.All("HostSystem") {
			host := entity.(*simulator.HostSystem)
			if host.Name != r.FormValue("host") {
				continue
			}
			simulator.Map.WithLock(host, func() {
				simulator.Map.Update(host, []types.PropertyChange{
					{Name: "runtime.connectionState", Val: state}, // summary.runtime is the same struct
				})
			})
			vmState := types.VirtualMachineConnectionStateConnected
			if state != types.HostSystemConnectionStateConnected {
				vmState = types.VirtualMachineConnectionStateDisconnected
			}
			for _, ref := range host.Vm {
				if vm, ok := simulator.Map.Get(ref).(*simulator.VirtualMachine); ok {
					simulator.Map.WithLock(vm, func() {
						simulator.Map.Update(vm, []types.PropertyChange{
							{Name: "runtime.connectionState", Val: vmState},
							{Name: "summary.runtime.connectionState", Val: vmState}})
					})
				}
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "no host of that name", http.StatusNotFound)
	}))
}

// selfSigned makes the certificate of -tls. govmomi's default one has a 1024-bit RSA key, which
// OpenSSL's default security level refuses, so a client could not verify it even when trusting it.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 64))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "vcsim lab"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// writeURL writes the URL to path atomically with mode 0600.
func writeURL(path string, u string) error {
	tmp, err := ioutil.TempFile(filepath.Dir(path), ".url-")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(u + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func run(o options) error {
	if err := checkLoopback(o.listen); err != nil {
		return err
	}
	if o.username == "" || o.password == "" {
		return fmt.Errorf("a user name and a password are required (-username, and $VCSIM_PASSWORD or -password)")
	}
	sizeHosts(o)
	slow, err := methodDelays(o.slow)
	if err != nil {
		return err
	}

	m := simulator.VPX()
	m.Datacenter = o.datacenter
	m.Cluster = o.cluster
	m.ClusterHost = o.hosts
	m.Host = o.standalone
	m.Machine = o.vms
	m.Datastore = o.datastores
	m.Autostart = o.autostart
	defer m.Remove()
	if err := m.Create(); err != nil {
		return fmt.Errorf("create inventory: %v", err)
	}
	varyUsage(o)
	guestTools()
	snapshotCapabilities()

	m.Service.Listen = &url.URL{Host: o.listen, User: url.UserPassword(o.username, o.password)}
	if o.rest {
		// Endpoints run in the order registered: the REST API (the blank import's init) first.
		m.Service.RegisterEndpoints = true
		simulator.RegisterEndpoint(func(s *simulator.Service, _ *simulator.Registry) {
			checkRESTLogin(s, o.username, o.password)
		})
	}
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return fmt.Errorf("-tls-cert and -tls-key go together")
	}
	if o.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
		if err != nil {
			return fmt.Errorf("load -tls-cert/-tls-key: %v", err)
		}
		m.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	} else if o.tls {
		cert, err := selfSigned()
		if err != nil {
			return fmt.Errorf("make a certificate: %v", err)
		}
		m.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	}
	s := m.Service.NewServer()
	defer s.Close()
	soapFixes(m.Service)
	hostConnection(m.Service, o.username, o.password)

	if o.traits {
		if err := setTraits(context.Background(), s.URL); err != nil {
			return fmt.Errorf("set host traits: %v", err)
		}
	}
	// Delays start after the setup calls above.
	m.DelayConfig.Delay = o.delayMS
	m.DelayConfig.DelayJitter = o.jitter
	m.DelayConfig.MethodDelay = slow

	public := *s.URL
	public.User = nil
	if o.urlFile != "" {
		if err := writeURL(o.urlFile, public.String()); err != nil {
			return fmt.Errorf("write -url-file: %v", err)
		}
	}
	fmt.Println(public.String())
	count := m.Count()
	log.Printf("serving %s: %d datacenter(s), %d cluster(s), %d host(s), %d VM(s)",
		public.String(), count.Datacenter, count.Cluster, count.Host, count.Machine)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	sig := <-stop
	log.Printf("stopping on %v", sig)
	return nil
}

func main() {
	log.SetFlags(log.LstdFlags)
	if err := run(parseFlags()); err != nil {
		log.Printf("vcsim: %v", err)
		os.Exit(1)
	}
}
