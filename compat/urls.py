from django.urls import path

from accounts.endpoints import by_method
from compat import audio, chat_completions, embeddings, gemini, gemini_models, messages, responses, views

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
    # Google's Gemini API: `{target}` is `<model>:<method>`, the model's id possibly holding a `/`.
    # On /v1 only its methods (`GET /v1/models` above is OpenAI's list); on /v1beta the model list too.
    path("v1/models/<path:target>", by_method(POST=gemini.model_method)),
    path("v1beta/models", gemini_models.models),
    path("v1beta/models/<path:target>", by_method(GET=gemini_models.model, POST=gemini.model_method)),
]
