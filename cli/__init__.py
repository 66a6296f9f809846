"""The application settings as Flask CLI commands (`flask --app app ...`)."""


def register_commands(app):
    """Attach every command group to the app."""
    from cli import db_commands, orgs, tokens

    for group in (db_commands.db_cli, orgs.orgs_cli, orgs.members_cli, tokens.tokens_cli):
        app.cli.add_command(group)
    try:
        from cli import demo
        app.cli.add_command(demo.demo_cli)
    except ImportError:
        pass
    try:
        from cli import webhooks
        app.cli.add_command(webhooks.webhooks_cli)
    except ImportError:
        pass
