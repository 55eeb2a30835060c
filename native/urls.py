from django.urls import path

from native import views

urlpatterns = [
    path("api/v1/version", views.version),
    path("api/v1/usage", views.usage),
]
