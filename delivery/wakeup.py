"""The delivery loop's wake-up pipe: request threads and signal handlers cut its sleep short."""
import os
import select


class Wakeup:
    """A self-pipe the loop sleeps on in `sleep()`; `wake()` is safe from any thread or a signal handler."""

    def __init__(self):
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)  # a full pipe already means "wake up"
        self.asleep = False  # in sleep(): only then must a finishing request write to the pipe

    def wake(self):
        """Make the current or next sleep() return at once."""
        try:
            os.write(self._write, b".")
        except BlockingIOError:
            pass

    def sleep(self, timeout, also=(), ready=lambda: False):
        """Sleep until woken, one of `also` is readable, or `timeout` passes; at once when `ready()`."""
        self.asleep = True
        try:
            # Checked after `asleep` is set: whatever made ready() true before that wrote nothing.
            timeout = 0.0 if ready() else max(0.0, timeout)
            readable, _, _ = select.select([self._read, *also], [], [], timeout)
        finally:
            self.asleep = False
        if self._read in readable:
            try:
                while os.read(self._read, 4096):
                    pass
            except BlockingIOError:
                pass

    def close(self):
        """Close both ends of the pipe."""
        os.close(self._read)
        os.close(self._write)
