"""Routes of the agents API."""

from rest_framework.routers import SimpleRouter

from agents_app.api.intents import IntentViewSet
from agents_app.api.views import AgentViewSet, ChatModelViewSet, ConversationViewSet

router = SimpleRouter()
router.register("models", ChatModelViewSet, basename="chat-model")
router.register("agents", AgentViewSet, basename="agent")
router.register("conversations", ConversationViewSet, basename="conversation")
router.register("intents", IntentViewSet, basename="intent")
urlpatterns = router.urls
