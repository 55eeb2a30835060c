from django.urls import path

from compat import audio, chat_completions, embeddings, messages, responses, views

urlpatterns = [
    path("v1/models", views.models),
    path("v1/chat/completions", chat_completions.chat_completions),
    path("v1/messages", messages.messages),
    path("v1/messages/count_tokens", messages.count_tokens),
    path("v1/responses", responses.responses),
    path("v1/responses/input_tokens", responses.input_tokens),
    path("v1/audio/transcriptions", audio.transcriptions),
    path("v1/audio/translations", audio.translations),
    path("v1/audio/speech", audio.speech),
    path("v1/embeddings", embeddings.embeddings),
]
