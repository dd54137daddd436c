// Command vcsim serves a simulated vCenter (govmomi's simulator) for the local lab.
//
// The default inventory is one datacenter with two clusters (they act as availability
// zones), three hosts per cluster, two VMs per cluster and one shared local datastore.
// Hosts get realistic sizes, varied usage figures and a "traits" custom attribute.
//
// It serves plain HTTP (the SOAP API at /sdk), or HTTPS with a self-signed certificate with
// -tls, on a loopback address only. The password
// is read from the VCSIM_PASSWORD environment variable (kept out of the process list)
// unless -password is given. The first line on stdout is the service URL without
// credentials; -url-file writes the same URL to a file (mode 0600, written atomically).
// SIGTERM or SIGINT stops the server and removes the simulated datastore directories.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io/ioutil"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/simulator/esx"
)

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
	tls        bool
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
	flag.BoolVar(&o.tls, "tls", false, "serve HTTPS with a self-signed certificate (for clients that only speak HTTPS)")
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

	m.Service.Listen = &url.URL{Host: o.listen, User: url.UserPassword(o.username, o.password)}
	if o.tls {
		m.Service.TLS = new(tls.Config)
	}
	s := m.Service.NewServer()
	defer s.Close()

	if o.traits {
		if err := setTraits(context.Background(), s.URL); err != nil {
			return fmt.Errorf("set host traits: %v", err)
		}
	}
	// Delays start after the setup calls above.
	m.DelayConfig.Delay = o.delayMS
	m.DelayConfig.DelayJitter = o.jitter

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
