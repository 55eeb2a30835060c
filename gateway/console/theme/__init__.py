"""The console in its theme (django-unfold, settings.UNFOLD) beyond what the theme does by itself:
the unknown page and the server error as HTML pages in the theme for a browser (`error_pages`), and
list columns narrow enough for a 1366-pixel screen (`server_columns`, the model server list).

May import: the console's other modules and every room below the console."""
