"""`django.contrib.admin` with Toolhub's site (tenants_app.admin_site) as the default `admin.site`.

Its own module: INSTALLED_APPS imports it before the models are ready, so it must import none.
"""

from django.contrib.admin.apps import AdminConfig


class ToolhubAdminConfig(AdminConfig):
    default_site = "tenants_app.admin_site.ToolhubAdminSite"
