"""Paths of OpenAI's Files API under /v1 (upload, list, read, content, delete), in OpenAI's shapes."""

from __future__ import annotations

from gateway.openapi.components import NULLABLE_STRING, json_response, obj, operation, ref, str_param

TAGS = ["compat"]
FILE_OBJECT = obj({"id": {"type": "string", "pattern": "^file-"}, "object": {"const": "file"},
                   "bytes": {"type": "integer", "minimum": 0}, "created_at": {"type": "integer"},
                   "filename": {"type": "string"}, "purpose": {"enum": ["batch", "user_data", "batch_output"]},
                   "status": {"const": "processed"}, "expires_at": {"type": ["integer", "null"]}},
                  {"status_details": {"type": "null"}})

SCHEMAS = {
    "FileObject": FILE_OBJECT,
    "FileUpload": obj({"file": {"type": "string", "contentMediaType": "application/octet-stream"},
                       "purpose": {"enum": ["batch", "user_data"]}},
                      {"expires_after[anchor]": {"const": "created_at"},  # OpenAI's `expires_after`, as a form sends it
                       "expires_after[seconds]": {"type": "integer", "minimum": 3600, "maximum": 2592000}}),
    "FileList": obj({"object": {"const": "list"}, "data": {"type": "array", "items": ref("FileObject")},
                     "first_id": NULLABLE_STRING, "last_id": NULLABLE_STRING, "has_more": {"type": "boolean"}}),
    "FileDeleted": obj({"id": {"type": "string"}, "object": {"const": "file"}, "deleted": {"const": True}}),
}


def _query(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


LIST_PARAMETERS = [
    _query("after", {"type": "string"}, "the id of the last file of the page before"),
    _query("limit", {"type": "integer", "minimum": 1, "maximum": 10000}, "files per page (10,000 unless given)"),
    _query("order", {"enum": ["asc", "desc"]}, "by creation time; desc unless given"),
    _query("purpose", {"type": "string"}, "only the files of this purpose"),
]


def paths() -> dict:
    p = {}
    path = "/v1/files"
    p[path] = {
        "post": operation(path, "Upload a file (multipart: file, purpose batch or user_data)",
                          {"200": json_response("The file", ref("FileObject"))}, body=ref("FileUpload"),
                          body_type="multipart/form-data", tags=TAGS,
                          description="A file over the gateway's size cap is a 413; one that would pass the "
                                      "group's file storage quota a 403 (`file_storage_quota_exceeded`). With "
                                      "`expires_after` (both fields) the file goes that many seconds after its "
                                      "`created_at` (`expires_at`), and is not found from then on."),
        "get": {**operation(path, "The caller's files, a page at a time",
                            {"200": json_response("A page of files", ref("FileList"))}, tags=TAGS),
                "parameters": LIST_PARAMETERS},
    }
    path = "/v1/files/{file_id}"
    p[path] = {"parameters": [str_param("file_id")],
               "get": operation(path, "A file of the caller's", {"200": json_response("The file", ref("FileObject"))},
                                tags=TAGS),
               "delete": operation(path, "Delete a file (its bytes and its record)",
                                   {"200": json_response("Deleted", ref("FileDeleted"))}, tags=TAGS)}
    path = "/v1/files/{file_id}/content"
    p[path] = {"parameters": [str_param("file_id")],
               "get": operation(path, "A file's bytes, as uploaded",
                                {"200": {"description": "The bytes (application/jsonl for a .jsonl file)",
                                         "content": {"*/*": {"schema": {"type": "string"}}}}}, tags=TAGS)}
    return p
