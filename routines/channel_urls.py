from django.urls import path

from routines import channel_views

urlpatterns = [
    path("api/v1/channels", channel_views.channels),
    path("api/v1/channels/<int:channel_id>", channel_views.channel_detail),
    path("api/v1/channels/telegram/link", channel_views.telegram_link),
    path("api/v1/channels/telegram/updates/<str:secret>", channel_views.telegram_updates),
    path("api/v1/channels/whatsapp", channel_views.whatsapp_number),
    path("api/v1/channels/whatsapp/verify", channel_views.whatsapp_confirm),
]
