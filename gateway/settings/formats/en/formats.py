"""One way to write a moment in the console: ISO dates, a 24-hour clock, the zone named (the
gateway runs in UTC, TIME_ZONE), as the model server health already wrote them
(gateway/console/server_admin.py). Only the output formats: Django's English input formats stay."""

DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
TIME_FORMAT = "H:i:s"
MONTH_DAY_FORMAT = "F j"
YEAR_MONTH_FORMAT = "F Y"
