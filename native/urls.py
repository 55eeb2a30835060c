from django.urls import path

from accounts.endpoints import by_method
from native import agent_views, chat, collection_views, conversation_views, embeddings, mcp_server, profile_views, views

urlpatterns = [
    path("api/v1/version", views.version),
    path("api/v1/usage", views.usage),
    path("api/v1/chat", chat.chat),
    path("api/v1/conversations", conversation_views.conversations),
    path("api/v1/conversations/<int:conversation_id>",
         by_method(GET=conversation_views.conversation_detail, DELETE=conversation_views.conversation_delete)),
    path("api/v1/conversations/<int:conversation_id>/permanent", conversation_views.conversation_permanent),
    path("api/v1/embeddings", embeddings.embeddings),
    path("api/v1/collections",
         by_method(GET=collection_views.collection_list, POST=collection_views.collection_create)),
    path("api/v1/collections/<int:collection_id>",
         by_method(GET=collection_views.collection_detail, DELETE=collection_views.collection_delete)),
    path("api/v1/collections/<int:collection_id>/documents",
         by_method(GET=collection_views.document_list, POST=collection_views.document_write)),
    path("api/v1/collections/<int:collection_id>/documents/<int:document_id>", collection_views.document_delete),
    path("api/v1/collections/<int:collection_id>/search", collection_views.collection_search),
    path("api/v1/collections/<int:collection_id>/reindex", collection_views.collection_reindex),
    path("api/v1/profiles", profile_views.profile_list),
    path("api/v1/profiles/refresh", profile_views.profile_refresh),
    path("api/v1/agent/chat", agent_views.agent_chat),
    path("api/v1/agent/run", agent_views.agent_run),
    path("api/v1/mcp", mcp_server.mcp),
]
