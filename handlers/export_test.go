package handlers

// SafeNext lets the external tests table-test the one function that decides
// where a sign-in may redirect.
var SafeNext = safeNext
