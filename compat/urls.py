from django.urls import path

from accounts.endpoints import by_method
from compat import (
    audio,
    batches,
    chat_completions,
    embeddings,
    files,
    gemini,
    gemini_models,
    message_batches,
    messages,
    moderations,
    responses,
    views,
)

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
    path("v1/moderations", moderations.moderations),
    path("v1/files", by_method(GET=files.list_files, POST=files.create_file)),
    path("v1/files/<str:file_id>", by_method(GET=files.retrieve_file, DELETE=files.delete_file)),
    path("v1/files/<str:file_id>/content", files.file_content),
    path("v1/batches", by_method(GET=batches.list_batches, POST=batches.create_batch)),
    path("v1/batches/<str:batch_id>", batches.retrieve_batch),
    path("v1/batches/<str:batch_id>/cancel", batches.cancel_batch),
    path("v1/messages/batches", by_method(GET=message_batches.list_batches, POST=message_batches.create_batch)),
    path("v1/messages/batches/<str:batch_id>",
         by_method(GET=message_batches.retrieve_batch, DELETE=message_batches.delete_batch)),
    path("v1/messages/batches/<str:batch_id>/cancel", message_batches.cancel_batch),
    path("v1/messages/batches/<str:batch_id>/results", message_batches.results),
]

# Google's Gemini API: `models/{model}:{method}`, the model's id possibly holding a `/`. On /v1 only its
# methods (`GET /v1/models` above is OpenAI's list); on /v1beta the model list too, its entries last.
GEMINI_METHODS = {"generateContent": gemini.generate_content, "streamGenerateContent": gemini.stream_generate_content,
                  "countTokens": gemini.count_tokens, "embedContent": gemini_models.embed_content,
                  "batchEmbedContents": gemini_models.batch_embed_contents}
urlpatterns += [path(f"{version}/models/<path:model>:{method}", view)
                for version in ("v1", "v1beta") for method, view in GEMINI_METHODS.items()]
urlpatterns += [
    path("v1beta/models", gemini_models.models),
    path("v1beta/models/<path:model>", gemini_models.model),
]
