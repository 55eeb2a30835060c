from django.urls import path

from account_pages import session, views

app_name = "account"
urlpatterns = [
    path("", views.home, name="home"),
    path("login/", session.Login.as_view(), name="login"),
    path("logout/", session.logout, name="logout"),
    path("key/", views.key, name="key"),
    path("key/generate/", views.key_generate, name="key_generate"),
    path("key/revoke/", views.key_revoke, name="key_revoke"),
    path("calls/", views.calls, name="calls"),
    path("calls/<int:pk>/", views.call, name="call"),
    path("routines/", views.routines, name="routines"),
    path("routines/<int:pk>/", views.routine, name="routine"),
    path("inbox/", views.inbox, name="inbox"),
    path("inbox/<int:pk>/", views.inbox_message, name="inbox_message"),
    path("inbox/<int:pk>/read/", views.inbox_read, name="inbox_read"),
]
