"""`python -m delivery`: one bounded pass (cron, every minute); `--watch` delivers continuously."""
import argparse
import logging
import signal

from delivery.settings import Settings
from delivery.worker import Dispatcher


def main(argv=None):
    """Run one pass, or watch until SIGTERM / SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m delivery", description=__doc__)
    parser.add_argument("--watch", action="store_true", help="deliver continuously, woken by NOTIFY")
    parser.add_argument("--seconds", type=float, help="claim new work for this long in a pass (default 45)")
    parser.add_argument("--verbose", action="store_true", help="also log each successful delivery")
    args = parser.parse_args(argv)

    from app import create_app  # the same configuration (SHIPTRACK_* variables) as the service

    settings = Settings.from_config(create_app().config)
    logging.getLogger("delivery").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    dispatcher = Dispatcher(settings)

    def stop(_signum, _frame):
        dispatcher.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        if args.watch:
            dispatcher.watch()
        else:
            dispatcher.run_pass(args.seconds)
    finally:
        dispatcher.close()


if __name__ == "__main__":
    main()
