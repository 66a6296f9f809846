"""gunicorn's gthread worker with the service's JSON refusals, for tests that hold for a threaded worker too."""
from gunicorn.workers.gthread import ThreadWorker

from serving import JsonErrorWorker

# Command-line options running the service on this worker with four threads (processes.gunicorn's `options`).
THREADED = ("-k", "tests.support.workers.ThreadedJsonErrorWorker", "--threads", "4")


class ThreadedJsonErrorWorker(ThreadWorker):
    """ThreadWorker answering what gunicorn refuses itself as serving.JsonErrorWorker does."""

    handle_error = JsonErrorWorker.handle_error
