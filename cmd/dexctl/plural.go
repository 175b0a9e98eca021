package main

import "fmt"

// plural is n with the noun's singular or plural form: "1 turn", "2 turns".
func plural[N ~int | ~int32 | ~int64 | ~uint32 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
