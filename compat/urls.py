from django.urls import path

from compat import views

urlpatterns = [
    path("v1/models", views.models),
]
