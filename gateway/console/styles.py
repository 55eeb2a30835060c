"""The look of what the console's own pages and fields draw themselves: buttons, notices and
tables in the theme's classes (django-unfold's, so its shipped stylesheet has them), beside Django's own
`button` class for the stock admin. Used by the key actions, the model server's test button and the
routine page."""

from unfold.widgets import INPUT_CLASSES

_BUTTON = ("button font-medium inline-flex items-center gap-1 rounded-default justify-center whitespace-nowrap "
           "cursor-pointer px-3 py-2 border")
BUTTON = (f"{_BUTTON} border-base-200 bg-white shadow-xs text-important dark:border-base-700 dark:bg-transparent "
          "hover:bg-base-100/80 dark:hover:bg-base-800/80")
PRIMARY_BUTTON = f"{_BUTTON} border-transparent bg-primary-600 text-white hover:bg-primary-600/80"
DANGER_BUTTON = f"{_BUTTON} border-transparent bg-red-600 text-white hover:bg-red-600/80"
INPUT = " ".join(INPUT_CLASSES)
WARNING = ("mb-3 px-3 py-2.5 leading-[18px] rounded-default bg-orange-100 text-orange-700 dark:bg-orange-500/20 "
           "dark:text-orange-400")
ERROR = "errornote mb-3 px-3 py-2.5 leading-[18px] rounded-default bg-red-100 text-red-700 dark:bg-red-500/20 " \
        "dark:text-red-400"
LINK = "text-primary-600 dark:text-primary-500"
TABLE = "border-spacing-none border-separate w-full"
TABLE_BOX = "border border-base-200 overflow-auto w-full rounded-default shadow-xs dark:border-base-800"
HEAD_ROW = "*:font-semibold *:px-3 *:py-2 *:text-left text-important whitespace-nowrap"
ROW = "*:border-t *:border-base-200 *:px-3 *:py-2 *:text-left *:align-top *:dark:border-base-800"


def look() -> dict[str, str]:
    """The classes above by name, for a template's context (`{{ look.button }}`)."""
    return {"button": BUTTON, "primary": PRIMARY_BUTTON, "danger": DANGER_BUTTON, "input": INPUT,
            "warning": WARNING, "error": ERROR}
