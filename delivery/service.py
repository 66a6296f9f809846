"""What every concern of the delivery process is: a service with a start, a stop and one loop.

The services take turns on the process's one thread and one database connection (delivery/worker.py
runs their loops, as procrastinate's worker runs its tasks on one event loop): recording must commit
before claiming counts each endpoint's leases, and a turn never holds a transaction open for another.
A service's loop is its `turn()`, repeated whenever its `due()` says so, until it is stopped.
"""
import enum


class ServiceState(enum.Enum):
    """Where a service stands: only a RUNNING service takes new work."""

    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"  # finishes what it holds, takes nothing new
    STOPPED = "stopped"


class Service:
    """A concern of the delivery process; subclasses write `turn()` and, when it is not always due, `due()`."""

    name = "service"

    def __init__(self):
        self.state = ServiceState.NEW

    def start(self):
        """Begin taking work."""
        self.state = ServiceState.RUNNING

    def stop(self):
        """Take no new work (safe from a signal handler); what is held is finished by later turns."""
        if self.state in (ServiceState.NEW, ServiceState.RUNNING):
            self.state = ServiceState.STOPPING

    def close(self):
        """Release what the service holds; it takes no more turns."""
        self.state = ServiceState.STOPPED

    @property
    def running(self):
        """True while the service takes new work."""
        return self.state is ServiceState.RUNNING

    def due(self, now):
        """True when the loop should take a turn at monotonic time `now`."""
        return True

    def turn(self):
        """One round of the service's loop on the link's connection; returns how much work it did."""
        raise NotImplementedError
