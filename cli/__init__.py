"""The application settings as Flask CLI commands (`flask --app app ...`)."""


def register_commands(app):
    """Attach every command group to the app."""
    from cli import db_commands, demo, mcp, openapi, orgs, tokens, webhooks
    from cli import webhook_events  # noqa: F401 (adds render-failures and retry-render to webhooks_cli)
    from cli import secrets

    for group in (db_commands.db_cli, orgs.orgs_cli, orgs.members_cli, tokens.tokens_cli,
                  demo.demo_cli, webhooks.webhooks_cli, openapi.openapi_cli, mcp.mcp_command):
        app.cli.add_command(group)
    app.cli.add_command(secrets.secrets_cli)
