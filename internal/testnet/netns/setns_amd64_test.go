package netns

// sysSetns is setns(2)'s number (the syscall package does not name it).
const sysSetns = 308
