from django.urls import path

from accounts.endpoints import by_method
from routines import views

urlpatterns = [
    path("api/v1/routines", by_method(GET=views.routine_list, POST=views.routine_create)),
    path("api/v1/routines/blueprints", views.blueprints),
    path("api/v1/routines/<int:routine_id>",
         by_method(GET=views.routine_detail, PUT=views.routine_update, DELETE=views.routine_delete)),
    path("api/v1/routines/<int:routine_id>/run-now", views.run_now),
    path("api/v1/routines/<int:routine_id>/rotate-token", views.rotate_token),
    path("api/v1/routines/<int:routine_id>/rotate-secret", views.rotate_secret),
    path("api/v1/routines/<int:routine_id>/runs", views.runs),
    path("api/v1/inbox", views.inbox),
    path("api/v1/inbox/<int:message_id>/read", views.inbox_read),
    # Any token: with webhooks off it is not looked at; its form is checked after (spec 4.7).
    path("api/v1/hooks/<str:token>", views.hook),
]
