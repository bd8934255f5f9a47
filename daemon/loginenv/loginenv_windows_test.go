package loginenv

import "os"

var getenvOS = os.Getenv
