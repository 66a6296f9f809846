"""`python -m delivery`: one bounded pass (cron, every minute); `--watch` delivers continuously."""
import argparse
import logging
import signal

from config import DEFAULTS, load_config
from delivery.sender import serve_metrics
from delivery.secret_key import SecretKeyError, check_at_start
from delivery.settings import Settings
from delivery.transport import CaBundleError
from delivery.worker import DatabaseUnavailable, Dispatcher
from logs import configure_logging
from models import db, deadline


def read_settings():
    """The delivery settings from the same table and variables as the service, without building the app."""
    values = load_config()
    return Settings.from_config(values, database_url=db.resolve_database_url(values["DATABASE_URL"]))


def main(argv=None):
    """Run one pass, or watch until SIGTERM / SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m delivery", description=__doc__)
    parser.add_argument("--watch", action="store_true", help="deliver continuously, woken by NOTIFY")
    parser.add_argument("--seconds", type=float, help="claim new work for this long in a pass "
                                                      f"(default {DEFAULTS['WEBHOOK_PASS_SECONDS']:g})")
    parser.add_argument("--verbose", action="store_true", help="also log each successful delivery")
    args = parser.parse_args(argv)

    settings = read_settings()
    # A database that stops answering ends a wait a little after the statement timeout (a connect at its
    # connect timeout), and the link reconnects with backoff, keeping what finished (models/deadline.py).
    deadline.install(*deadline.beyond(settings.target.statement_timeout, "DELIVERY_STATEMENT_TIMEOUT"))
    config = load_config()
    configure_logging(config["LOG_FORMAT"])
    serve_metrics(config)
    logging.getLogger("delivery").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    try:
        dispatcher = Dispatcher(settings)
    except DatabaseUnavailable as error:  # refused, unreachable, not answering within the timeout, or setup
        _give_up(error)
    except CaBundleError as error:  # one line and exit, not a traceback: nothing could be sent with it
        logging.getLogger("delivery").error("%s", error)
        raise SystemExit(1) from None

    def stop(_signum, _frame):
        dispatcher.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        check_at_start(dispatcher.link.conn, settings.secret_keys)
        if args.watch:
            _say_started(dispatcher.link.conn)
            dispatcher.watch()
        else:
            dispatcher.run_pass(args.seconds)
    except DatabaseUnavailable as error:
        _give_up(error)
    except SecretKeyError as error:  # at start: the key opens none of the stored secrets (docs/secret-key.md)
        logging.getLogger("delivery").error("%s", error)
        raise SystemExit(1) from None
    finally:
        dispatcher.close()


def _say_started(conn):
    """The line a long-running process starts with: what it does, and where it connects (never a password)."""
    info = conn.info
    logging.getLogger("delivery").info(
        "delivering webhooks until SIGTERM, each event within a second of its commit (woken by NOTIFY) "
        "database=%s host=%s port=%s user=%s", info.dbname, info.host, info.port, info.user)


def _give_up(error):
    if isinstance(error, db.DatabaseSetupError):
        logging.getLogger("delivery").error("database setup error, exiting (a configuration to fix, not an "
                                            "outage) error=%r", str(error))
    else:
        logging.getLogger("delivery").error("database unreachable, giving up error=%r", str(error))
    raise SystemExit(1) from None


if __name__ == "__main__":
    main()
