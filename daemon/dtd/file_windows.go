package dtd

// oNoFollow: Windows has no such open flag; Read checks with Lstat and
// os.SameFile that it opened the regular file it looked at.
const oNoFollow = 0
