-- Reserved for the usage roll-up's migration (branch t34-usage); replaced by it on merge.
SELECT 1;
