from django.urls import path

from accounts.endpoints import by_method
from admin_api import (
    account_views,
    alias_views,
    group_views,
    key_views,
    model_views,
    record_views,
    routine_views,
    server_views,
)

ADMIN = "api/v1/admin/"

urlpatterns = [
    path(ADMIN + "accounts", by_method(GET=account_views.account_list, POST=account_views.account_create)),
    path(ADMIN + "accounts/<int:account_id>",
         by_method(GET=account_views.account_detail, PATCH=account_views.account_update,
                   DELETE=account_views.account_delete)),
    path(ADMIN + "accounts/<int:account_id>/api-key",
         by_method(POST=key_views.key_generate, DELETE=key_views.key_revoke)),
    path(ADMIN + "groups", by_method(GET=group_views.group_list, POST=group_views.group_create)),
    path(ADMIN + "groups/<int:group_id>",
         by_method(GET=group_views.group_detail, PATCH=group_views.group_update, DELETE=group_views.group_delete)),
    path(ADMIN + "servers", by_method(GET=server_views.server_list, POST=server_views.server_create)),
    path(ADMIN + "servers/<int:server_id>",
         by_method(GET=server_views.server_detail, PATCH=server_views.server_update,
                   DELETE=server_views.server_delete)),
    path(ADMIN + "models", by_method(GET=model_views.model_list, POST=model_views.model_create)),
    path(ADMIN + "models/<int:model_id>",
         by_method(GET=model_views.model_detail, PATCH=model_views.model_update, DELETE=model_views.model_delete)),
    path(ADMIN + "aliases", by_method(GET=alias_views.alias_list, POST=alias_views.alias_create)),
    path(ADMIN + "aliases/<int:alias_id>",
         by_method(GET=alias_views.alias_detail, PATCH=alias_views.alias_update, DELETE=alias_views.alias_delete)),
    path(ADMIN + "routines", routine_views.routine_list),
    path(ADMIN + "routines/<int:routine_id>",
         by_method(GET=routine_views.routine_detail, PATCH=routine_views.routine_pause)),
    path(ADMIN + "usage", record_views.usage_list),
    path(ADMIN + "calls", record_views.call_list),
]
