"""Production: everything from the environment, secure cookies, keys required."""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import TOOLHUB_SECRET_KEYS

DEBUG = False
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
if not TOOLHUB_SECRET_KEYS:
    raise ImproperlyConfigured("TOOLHUB_SECRET_KEYS must be set in production (comma-separated Fernet keys)")
