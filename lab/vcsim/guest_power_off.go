package main

// POST /lab/vm-guest-power-off (lab-only) powers a VM off as vCenter shows a VM whose guest shut
// itself down or whose process died: no task, runtime.powerState poweredOff, and one
// VmPoweredOffEvent posted by nobody (no user name, a chain of its own). govmomi 0.24.2's
// simulator has no guest to do that: every power-off it makes comes from a call (PowerOffVM_Task,
// ShutdownGuest), recorded with the caller's user name. Basic auth with the simulator's user
// name and password; the form field vm names the VM. Served when the simulator registers
// endpoints (the default; see run).

import (
	"net/http"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
)

func init() {
	simulator.RegisterEndpoint(guestPowerOff)
}

func guestPowerOff(s *simulator.Service, _ *simulator.Registry) {
	s.Handle("/lab/vm-guest-power-off", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		password, _ := s.Listen.User.Password()
		if !labRequest(w, r, s.Listen.User.Username(), password) {
			return
		}
		for _, entity := range simulator.Map.All("VirtualMachine") {
			vm := entity.(*simulator.VirtualMachine)
			if vm.Name != r.FormValue("vm") {
				continue
			}
			if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
				http.Error(w, "the VM is not powered on", http.StatusConflict)
				return
			}
			host, ok := simulator.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem)
			if !ok {
				http.Error(w, "the VM has no host", http.StatusConflict)
				return
			}
			simulator.Map.WithLock(vm, func() {
				simulator.Map.Update(vm, []types.PropertyChange{
					{Name: "runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOff},
					{Name: "summary.runtime.powerState", Val: types.VirtualMachinePowerStatePoweredOff},
					{Name: "summary.runtime.bootTime", Val: nil}})
			})
			event := &types.VmPoweredOffEvent{VmEvent: types.VmEvent{Event: types.Event{
				Host: &types.HostEventArgument{EntityEventArgument: types.EntityEventArgument{Name: host.Name},
					Host: host.Self},
				Vm: &types.VmEventArgument{EntityEventArgument: types.EntityEventArgument{Name: vm.Name},
					Vm: vm.Self},
			}}}
			manager := simulator.Map.EventManager()
			nobody := &simulator.Context{Session: &simulator.Session{}} // no session: no user name
			simulator.Map.WithLock(manager, func() {
				manager.PostEvent(nobody, &types.PostEvent{EventToPost: event})
			})
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.Error(w, "no VM of that name", http.StatusNotFound)
	}))
}
