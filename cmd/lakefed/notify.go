package main

import (
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notify tells the service manager what the process is doing, by
// sd_notify(3) on $NOTIFY_SOCKET (systemd sets it for Type=notify units):
// READY=1 once every listener accepts connections, RELOADING=1 and
// READY=1 around a SIGHUP reload, STOPPING=1 as shutdown begins. Without
// $NOTIFY_SOCKET it does nothing. A failure is logged, never fatal: the
// service runs on, and systemd reports the start that never said ready.
func notify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("sd_notify failed", "state", state, "err", err)
	}
}

// notifyReloading is RELOADING=1 with the time it began, which systemd
// (253 and later) asks for so that it can tell this reload from an
// earlier one.
func notifyReloading(log *slog.Logger) {
	notify(log, daemon.SdNotifyReloading+"\n"+daemon.SdNotifyMonotonicUsec())
}
