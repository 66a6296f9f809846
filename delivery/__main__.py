"""`python -m delivery`: one bounded pass (cron, every minute); `--watch` delivers continuously."""
import argparse
import logging
import signal

from config import DEFAULTS, configure_logging, load_config
from delivery.secret_key import SecretKeyError, check_at_start
from delivery.settings import Settings
from delivery.worker import DatabaseUnavailable, Dispatcher
from models import db


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
    configure_logging()
    logging.getLogger("delivery").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    dispatcher = Dispatcher(settings)

    def stop(_signum, _frame):
        dispatcher.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        check_at_start(dispatcher.conn, settings.secret_keys)
        if args.watch:
            dispatcher.watch()
        else:
            dispatcher.run_pass(args.seconds)
    except DatabaseUnavailable as error:
        logging.getLogger("delivery").error("database unreachable, giving up error=%r", str(error))
        raise SystemExit(1) from None
    except SecretKeyError as error:  # at start, or a key changed under a running process (docs/secret-key.md)
        logging.getLogger("delivery").error("%s", error)
        raise SystemExit(1) from None
    finally:
        dispatcher.close()


if __name__ == "__main__":
    main()
