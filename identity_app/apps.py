"""Identity app config: company sign-in (OpenID Connect), SCIM provisioning and the leaver clean-up."""

from django.apps import AppConfig


class IdentityAppConfig(AppConfig):
    name = "identity_app"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Company sign-in"
